#!/usr/bin/env python3
"""What PyTorch's allocator holds on a GPU besides a program's tensors: the cuBLAS workspaces
(one per cuBLAS handle and stream; handles are per thread), the origin of the device figure
`workspace_mib` (runtime/core/cluster_spec.h, docs/live-fidelity.md, "On a GPU's caching
allocator").

In a fresh process, after each step every tensor it made is freed again, so what
torch.cuda.memory_allocated() still counts is held by the framework:
  1. a float64 GEMM on this thread
  2. a float32 GEMM on this thread
  3. a Linear layer's forward and backward (the backward's GEMMs run on autograd's device
     thread: its own handle)
  4. a float32 GEMM on a second stream of this thread
Prints one line per step: held MiB after it, and the growth.

Usage: python3 scripts/gpu_workspace_probe.py
"""
import sys

from gpu_common import cuda_device


def main():
    found = cuda_device("gpu_workspace_probe")
    if found is None:
        return 2
    torch, dev = found
    mib = float(1 << 20)
    held = [torch.cuda.memory_allocated(dev)]

    def report(what):
        torch.cuda.synchronize(dev)
        now = torch.cuda.memory_allocated(dev)
        print(f"{what:<44} held {now / mib:8.3f} MiB  (+{(now - held[-1]) / mib:.3f})")
        held.append(now)

    print(f"{torch.cuda.get_device_name(dev)}, torch {torch.__version__}")
    report("start")
    a = torch.randn(512, 512, device=dev, dtype=torch.float64)
    c = a @ a
    del a, c
    report("1. float64 GEMM, this thread")
    a = torch.randn(512, 512, device=dev)
    c = a @ a
    del a, c
    report("2. float32 GEMM, this thread")
    layer = torch.nn.Linear(512, 512, device=dev)
    x = torch.randn(64, 512, device=dev, requires_grad=True)
    layer(x).sum().backward()
    del layer, x
    report("3. Linear forward + backward (autograd)")
    s = torch.cuda.Stream(dev)
    with torch.cuda.stream(s):
        a = torch.randn(512, 512, device=dev)
        c = a @ a
        del a, c
    s.synchronize()
    report("4. float32 GEMM, a second stream")
    return 0


if __name__ == "__main__":
    sys.exit(main())
