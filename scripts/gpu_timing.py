"""Timing helper shared by the GPU scripts (gpu_gemm_sweep.py, gpu_stream_bench.py)."""
import statistics


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
