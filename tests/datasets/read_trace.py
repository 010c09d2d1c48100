"""Reads a shardgym trace with h5py from docs/trace-format.md alone and checks it against the
closed-form values of tests/datasets/trace_fixtures.h.

usage: read_trace.py TRACE COMPLETE_EPISODES OBS_DIM INCOMPLETE_EPISODES
Exit 0 when every check passes; otherwise prints what differs and exits 1.
"""
import sys

import h5py
import numpy as np

B, P, K = 4, 4, 5
STRATEGIES = ["dp", "tp1d(t=2)", "tp1d(t=4)", "tp2d(d1=2,d2=2,first=row)"]


def steps_of(e):
    return 3 + 2 * e


def check(cond, what):
    if not cond:
        print("read_trace.py: FAILED:", what)
        sys.exit(1)


def main():
    path = sys.argv[1]
    complete, dim, incomplete = (int(a) for a in sys.argv[2:5])
    with h5py.File(path, "r") as f:
        check(f.attrs["format"] == "shardgym-trace", "format attribute")
        check(int(f.attrs["version"]) == 1, "version attribute")
        check(f.attrs["env_id"] == "shardgym/TPTest-v0", "env_id")
        check(f.attrs["config"].startswith("name: trace-test"), "config text")
        check(f.attrs["git_sha"] == "0123abcd", "git_sha")
        for key in ("created", "host"):
            check(isinstance(f.attrs[key], str) and f.attrs[key], key)
        table = [s.decode("ascii") for s in f["strategies"][:]]
        check(sorted(table) == sorted(STRATEGIES), "strategies table %r" % table)

        names = sorted(f["episodes"], key=lambda n: int(n.split("_")[1]))
        done = [n for n in names if f["episodes"][n].attrs["complete"] == 1]
        check(len(done) == complete, "%d complete episodes, want %d" % (len(done), complete))
        check(len(names) - len(done) == incomplete, "incomplete episodes")
        for e, name in enumerate(done):
            g = f["episodes"][name]
            n = steps_of(e)
            check(name == "episode_%d" % e, "episode name " + name)
            check(int(g.attrs["seed"]) == 100 + e, "seed")
            check(g.attrs["agent"] == "random" and g.attrs["backend"] == "sim", "agent/backend")
            check(int(g.attrs["steps"]) == n, "steps attribute")
            shapes = {
                "observations": (n + 1, dim), "actions": (n, B), "rewards": (n,),
                "terminations": (n,), "truncations": (n,), "plans": (n, B),
                "metrics/step_latency_s": (n,), "metrics/repartition_s": (n,),
                "metrics/energy_j": (n,), "metrics/peak_memory_bytes": (n, P),
                "metrics/block_fwd_s": (n, B), "metrics/block_bwd_s": (n, B),
                "metrics/block_comm_s": (n, B),
            }
            for ds, shape in shapes.items():
                got = g[ds].shape
                check(got == shape, "%s/%s shape %s, want %s" % (name, ds, got, shape))
            check(g["observations"].dtype == np.float32, "observations dtype")
            check(g["actions"].dtype == np.int32 and g["plans"].dtype == np.int32, "int32 dtypes")
            check(g["rewards"].dtype == np.float64, "rewards dtype")
            check(g["terminations"].dtype == np.uint8, "terminations dtype")

            rows = np.arange(n + 1)[:, None]
            cols = np.arange(dim)[None, :]
            want_obs = (e + rows * 0.01 + cols * 0.001).astype(np.float32)
            check(np.array_equal(g["observations"][:], want_obs), "observations values")
            t = np.arange(n)
            check(np.array_equal(g["rewards"][:], -(e * 1000.0 + t + 0.25)), "rewards values")
            last = np.zeros(n, np.uint8)
            last[-1] = 1
            terminated, truncated = (last, 0 * last) if e % 2 == 0 else (0 * last, last)
            check(np.array_equal(g["terminations"][:], terminated), "terminations")
            check(np.array_equal(g["truncations"][:], truncated), "truncations")
            want_actions = (e + t[:, None] + np.arange(B)[None, :]) % K
            check(np.array_equal(g["actions"][:], want_actions), "actions values")
            check(np.array_equal(g["metrics/step_latency_s"][:], 0.1 + e + t * 1e-3), "latency")
            check(g["metrics/step_latency_s"].attrs["source"] == "wallclock", "latency source")
            check(g["metrics/peak_memory_bytes"].attrs["units"] == "bytes", "memory units")
            want_peak = 1e9 * (np.arange(P)[None, :] + 1) + t[:, None] * 1e3 + e
            check(np.array_equal(g["metrics/peak_memory_bytes"][:], want_peak), "peak memory")
            want_fwd = 1e-3 * (np.arange(B)[None, :] + 1) + t[:, None] * 1e-6 + e
            check(np.array_equal(g["metrics/block_fwd_s"][:], want_fwd), "block_fwd_s")
            plans = g["plans"][:]
            for step in range(n):
                for b in range(B):
                    want = STRATEGIES[(e + step + 1 + b) % len(STRATEGIES)]
                    check(table[plans[step, b]] == want, "plan of step %d block %d" % (step, b))
            base = g["scalars/baseline_latency_s"][:]
            backfilled = np.isnan(base[:2]).all() and np.array_equal(base[2:], 0.5 + t[2:])
            check(backfilled, "scalar absent at steps 0-1 reads as NaN")
            check(float(g["reset"].attrs["step_latency_s"]) == 0.1 + e - 1e-3, "reset measurement")
    print("read_trace.py: OK (%d complete, %d incomplete episodes)" % (complete, incomplete))


if __name__ == "__main__":
    main()
