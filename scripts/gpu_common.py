"""Helpers shared by the GPU scripts (scripts/gpu_*.py, run by scripts/gpu_checks.sh)."""
import statistics
import sys


def cuda_device(script):
    """(torch, the current CUDA device), or None after saying on stderr why there is none:
    PyTorch not importable, or no CUDA device visible. `script` names the caller."""
    try:
        import torch
    except ImportError:
        print(f"{script}: PyTorch is not importable here", file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print(f"{script}: no CUDA device visible", file=sys.stderr)
        return None
    return torch, torch.device("cuda", torch.cuda.current_device())


def cuda_event_median_ms(torch, fn, warmup=3, repeats=10):
    """Median milliseconds of `fn` over `repeats` runs, each between two CUDA events, after
    `warmup` untimed runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)
