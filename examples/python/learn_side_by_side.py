"""The PPO learners of this repository on one config, one after another, in one table: the
C++ PPO (`shardgym bench learn`) as the config sets it (on the quickstart with its plan
search, polish=4) and without the search (`--no-search-agent`), sb3-contrib's MaskablePPO
(maskable_ppo.py) and the CleanRL-style PPO (cleanrl_ppo.py).

    .venv/bin/python examples/python/learn_side_by_side.py [--config experiments/quickstart.yaml]

Each runs as its own process with its own defaults (documented in each), training seed
`--seed`, evaluation seed `--eval-seed`, and stops at the first greedy evaluation episode
whose return reaches `--target` x the static oracle's return on the evaluation seed (the
same oracle for all: the C++ `oracle` agent). Reported per learner: env steps at that
evaluation — every step the learner caused: its training rollouts, the episodes of its own
searches, and the greedy evaluation episodes that decide when it stops — and of them those of
training, wall time (of training, evaluations included), the process's whole wall time
(start-up, imports and the oracle's episode included) and the final ratio. The evaluation
seed is by default 2^31, a seed no training env plays. The runs are
sequential so that none slows another down; on a shared machine the load still moves wall
times (the load average is printed).
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]


class HelpFormatter(argparse.RawDescriptionHelpFormatter,
                    argparse.ArgumentDefaultsHelpFormatter):
    """--help: the module docstring as written, each flag with its default."""


def default_cli():
    binary = os.environ.get("SHARDGYM_BINARY_DIR")
    for path in ([pathlib.Path(binary, "experiments", "shardgym")] if binary else []) + [
            ROOT / "build" / "experiments" / "shardgym"]:
        if path.exists():
            return str(path)
    return shutil.which("shardgym")


def run(cmd, timeout):
    """Runs cmd; returns (stdout, process wall time)."""
    start = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        sys.exit(f"learn_side_by_side: {' '.join(cmd)} failed (exit {out.returncode}):\n"
                 f"{out.stderr.strip()}")
    return out.stdout, time.time() - start


def cpp_ppo(args, agent=None):
    cmd = [args.shardgym, "bench", "learn", args.config, "--threshold", str(args.target),
           "--seed", str(args.seed), "--eval-seed", str(args.eval_seed), "--json",
           "--max-steps", str(args.max_steps), "--budget-s", str(args.timeout)]
    if agent:
        cmd += ["--agent", agent]
    text, wall = run(cmd, args.timeout + 60)
    r = json.loads(text[text.index("{"):])
    best = max(p["eval_return"] for p in r["points"]) if r["points"] else 0.0
    last = r["points"][-1]["eval_return"] if r["points"] else 0.0
    # The counts at the evaluation that reached the target (else at the last one).
    at = next((p for p in r["points"]
               if r["reached"] and p["env_steps"] == r["steps_to_threshold"]),
              r["points"][-1] if r["points"] else {})
    return {"learner": f"C++ PPO ({r['agent']}, {r['envs']} envs)", "reached": r["reached"],
            "steps": r["steps_to_threshold"] if r["reached"] else None,
            "env_steps": at.get("env_steps", 0), "training_steps": at.get("training_steps", 0),
            "search_steps": at.get("search_steps", 0),
            "train_s": r["time_to_threshold_s"] if r["reached"] else None,
            "process_s": wall, "ratio": last / r["oracle_return"],
            "best_ratio": best / r["oracle_return"], "oracle_return": r["oracle_return"],
            "command": cmd}


def python_learner(args, script, label, flags):
    cmd = [sys.executable, str(HERE / script), "--config", args.config,
           "--target", str(args.target), "--seed", str(args.seed),
           "--eval-seed", str(args.eval_seed)] + flags
    text, wall = run(cmd, args.timeout + 120)
    r = json.loads(text.strip().splitlines()[-1])
    reached = r["result"] == "reached"
    return {"learner": label, "reached": reached,
            "steps": r["env_steps"] if reached else None, "env_steps": r["env_steps"],
            "training_steps": r["steps"], "search_steps": 0,
            "train_s": r["wall_s"] if reached else None, "process_s": wall,
            "ratio": r["ratio"], "best_ratio": r["best"]["ratio"],
            "oracle_return": r["oracle_return"], "command": cmd}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--config", default=str(ROOT / "experiments" / "quickstart.yaml"))
    p.add_argument("--target", type=float, default=0.95, help="fraction of the oracle's return")
    p.add_argument("--seed", type=int, default=0, help="training seed of every learner")
    p.add_argument("--eval-seed", type=int, default=2 ** 31,
                   help="seed of the evaluation episode (no training env plays it)")
    p.add_argument("--max-steps", type=int, default=300_000, help="env-step budget of each")
    p.add_argument("--timeout", type=int, default=900, help="wall-clock budget of each, s")
    p.add_argument("--shardgym", default=default_cli(),
                   help="the shardgym CLI (default: $SHARDGYM_BINARY_DIR or build/)")
    p.add_argument("--no-search-agent", default="ppo(ent=0.03)",
                   help="the C++ PPO of `cpp-nosearch`: the quickstart's agent without polish")
    p.add_argument("--only", default="cpp,cpp-nosearch,maskable,cleanrl",
                   help="comma-separated subset of cpp, cpp-nosearch, maskable, cleanrl")
    args = p.parse_args()
    only = args.only.split(",")
    learners = {"cpp", "cpp-nosearch", "maskable", "cleanrl"}
    if not set(only) <= learners:
        p.error(f"--only: unknown learner in {args.only!r} ({', '.join(sorted(learners))})")
    if {"cpp", "cpp-nosearch"} & set(only) and not args.shardgym:
        p.error("no shardgym CLI found: build it (scripts/build.sh) or pass --shardgym")

    rows = []
    for name in only:
        load = os.getloadavg()[0]
        if name == "cpp":
            row = cpp_ppo(args)
        elif name == "cpp-nosearch":
            row = cpp_ppo(args, args.no_search_agent)
        elif name == "maskable":
            row = python_learner(args, "maskable_ppo.py", "MaskablePPO (sb3-contrib)",
                                 ["--max-steps", str(args.max_steps)])
        else:
            row = python_learner(args, "cleanrl_ppo.py", "cleanrl_ppo.py",
                                 ["--total-timesteps", str(args.max_steps), "--quiet"])
        row["load_avg_1min"] = load
        print(json.dumps(row), flush=True)
        rows.append(row)

    oracle = rows[0]["oracle_return"]
    print(f"\n{args.config}: target {args.target:.0%} of the oracle's return ({oracle:.2f}), "
          f"training seed {args.seed}, evaluation seed {args.eval_seed}")
    head = ("learner", "env steps to target (all)", "of them training", "of them search",
            "train wall s", "process wall s", "final ratio", "load")
    print(f"| {' | '.join(head)} |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        steps = f"{r['steps']:,}" if r["reached"] else (
            f"not reached in {r['env_steps']:,} (best {r['best_ratio']:.3f})")
        train = f"{r['train_s']:.1f}" if r["reached"] else "-"
        print(f"| {r['learner']} | {steps} | {r['training_steps']:,} | {r['search_steps']:,} | "
              f"{train} | {r['process_s']:.1f} | {r['ratio']:.3f} | {r['load_avg_1min']:.1f} |")


if __name__ == "__main__":
    main()
