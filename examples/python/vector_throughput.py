"""Env steps per second of shardgym.vector (N envs stepped in C++) against Gymnasium's
SyncVectorEnv over N single ShardGym envs, on one core.

    .venv/bin/python examples/python/vector_throughput.py [--config experiments/vector-bench.yaml]

Both vector envs hold `--num-envs` copies of the config's env (make_env's wrappers: TimeLimit,
NormalizeReward) and replay the same actions, so they do the same simulator work:

- "changing plans": a pool recorded before timing, as `shardgym bench sim` records its own:
  from the reset plan, each action changes 1-3 blocks to entries the mask allows; the pool
  covers whole episodes, so after its last action every env is back at a reset and the pool
  replays from its start. Every env of the vector env plays the same pool in step.
- "same plan": every env keeps the plan in force (the reset plan) at every step.

The process is pinned to one core (`--cpu`) and the C++ vector env runs one thread. Each
case is timed for `--seconds` of wall clock; the CPU time of the process is printed beside
it (on a shared machine the wall-clock figure falls with the load, the CPU-time one much
less). Prints one JSON line per measurement and a table.
"""
import argparse
import json
import os
import time

import gymnasium
import numpy as np

import shardgym
import shardgym.vector

ENV_ID = "shardgym/TPSim-v0"


class HelpFormatter(argparse.RawDescriptionHelpFormatter,
                    argparse.ArgumentDefaultsHelpFormatter):
    """--help: the module docstring as written, each flag with its default."""


def record_pool(config, episodes, seed):
    """Actions of `episodes` whole episodes of one env: each changes 1-3 blocks of the plan in
    force to entries its mask allows. Returns (pool (P, A) int32, the reset plan (A,))."""
    env = gymnasium.make(ENV_ID, config=config)
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    initial = obs["plan"].astype(np.int32)
    k = len(env.unwrapped.catalog)
    blocks = len(initial)
    pool, current = [], initial.copy()
    ended = 0
    while ended < episodes:
        mask = info["action_mask_flat"][:blocks * k].reshape(blocks, k)
        action = current.copy()
        for _ in range(rng.integers(1, 4)):
            b = rng.integers(blocks)
            action[b] = rng.choice(np.flatnonzero(mask[b]))
        obs, _, terminated, truncated, info = env.step(action)
        pool.append(action)
        if terminated or truncated:
            ended += 1
            obs, info = env.reset(seed=seed)
            current = initial.copy()
        else:
            current = action
    return np.stack(pool), initial


def timed(seconds, step):
    """Calls step(i) until `seconds` have passed; returns (calls, wall s, CPU s)."""
    calls = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    while True:
        for _ in range(16):
            step(calls)
            calls += 1
        wall = time.perf_counter() - t0
        if wall >= seconds:
            return calls, wall, time.process_time() - cpu0


def bench(name, venv, actions, seconds, num_envs):
    """actions: (P, N, A); the pool replays cyclically from a fresh reset."""
    venv.reset(seed=0)
    n = len(actions)
    for i in range(n):  # warm-up: one untimed pass fills every env's cost caches
        venv.step(actions[i])
    calls, wall, cpu = timed(seconds, lambda i: venv.step(actions[i % n]))
    return {"vector_env": name, "env_steps": calls * num_envs, "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3), "steps_per_s": round(calls * num_envs / wall),
            "steps_per_cpu_s": round(calls * num_envs / cpu)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--config", default="experiments/vector-bench.yaml", help="experiment YAML")
    p.add_argument("--num-envs", type=int, default=64, help="envs in each vector env")
    p.add_argument("--seconds", type=float, default=3.0, help="timed wall clock per case")
    p.add_argument("--pool-episodes", type=int, default=2,
                   help="whole episodes of actions in the changing-plans pool")
    p.add_argument("--cpu", type=int, default=None,
                   help="core to pin the process to (default: the first one allowed)")
    p.add_argument("--cases", default="changing,same", help="comma-separated: changing, same")
    p.add_argument("--skip-gymnasium", action="store_true", help="time shardgym.vector only")
    args = p.parse_args()
    if args.num_envs < 1 or args.seconds <= 0 or args.pool_episodes < 1:
        p.error("--num-envs and --pool-episodes must be >= 1, --seconds > 0")
    cases = args.cases.split(",")
    if not set(cases) <= {"changing", "same"}:
        p.error(f"--cases: unknown case in {args.cases!r} (changing, same)")
    cpu = args.cpu if args.cpu is not None else min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})

    pool, initial = record_pool(args.config, args.pool_episodes, seed=0)
    n = args.num_envs
    work = {"changing": np.ascontiguousarray(np.repeat(pool[:, None, :], n, axis=1)),
            "same": np.ascontiguousarray(np.broadcast_to(initial, (1, n, len(initial))))}
    print(json.dumps({"config": args.config, "num_envs": n, "cpu": cpu,
                      "pool_actions": len(pool), "load_avg_1min": os.getloadavg()[0]}),
          flush=True)

    rows = []
    for case in cases:
        actions = work[case]
        venv = shardgym.vector.make(ENV_ID, num_envs=n, config=args.config, threads=1)
        ours = bench("shardgym.vector", venv, actions, args.seconds, n)
        venv.close()
        ours["case"] = case
        print(json.dumps(ours), flush=True)
        theirs = None
        if not args.skip_gymnasium:
            sync = gymnasium.vector.SyncVectorEnv(
                [lambda: gymnasium.make(ENV_ID, config=args.config)] * n)
            theirs = bench("gymnasium.SyncVectorEnv", sync, actions.astype(np.int64),
                           args.seconds, n)
            sync.close()
            theirs["case"] = case
            print(json.dumps(theirs), flush=True)
        rows.append((case, ours, theirs))

    print(f"\n{n} envs on core {cpu}, {args.config}; load average {os.getloadavg()[0]:.2f}")
    print(f"{'case':<10} {'shardgym.vector':>28} {'SyncVectorEnv':>28} {'ratio':>7}")
    print(f"{'':<10} {'steps/s (wall / CPU)':>28} {'steps/s (wall / CPU)':>28} {'(CPU)':>7}")
    for case, ours, theirs in rows:
        a = f"{ours['steps_per_s']:,} / {ours['steps_per_cpu_s']:,}"
        b = f"{theirs['steps_per_s']:,} / {theirs['steps_per_cpu_s']:,}" if theirs else "-"
        r = f"{ours['steps_per_cpu_s'] / theirs['steps_per_cpu_s']:.1f}" if theirs else "-"
        print(f"{case:<10} {a:>28} {b:>28} {r:>7}")


if __name__ == "__main__":
    main()
