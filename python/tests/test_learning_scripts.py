"""Smoke runs of the measurement scripts beside the learning examples (they run, they report):
examples/python/vector_throughput.py and examples/python/learn_side_by_side.py, on
experiments/tiny.yaml with tiny budgets. The figures they print are in docs/benchmarks.md."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, cli_or_skip

TINY = str(ROOT / "experiments" / "tiny.yaml")
EXAMPLES = ROOT / "examples" / "python"


def run(args):
    out = subprocess.run([sys.executable] + args, check=True, capture_output=True, text=True,
                         env=dict(os.environ), timeout=600)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def test_vector_throughput_script_reports_both_vector_envs():
    rows = run([str(EXAMPLES / "vector_throughput.py"), "--config", TINY, "--num-envs", "4",
                "--seconds", "0.05", "--pool-episodes", "1"])
    assert rows[0]["num_envs"] == 4 and rows[0]["pool_actions"] >= 20  # one 20-step episode
    timed = rows[1:]
    assert {(r["case"], r["vector_env"]) for r in timed} == {
        (c, v) for c in ("changing", "same")
        for v in ("shardgym.vector", "gymnasium.SyncVectorEnv")}
    for r in timed:
        assert r["env_steps"] > 0 and r["env_steps"] % 4 == 0 and r["steps_per_cpu_s"] > 0


def test_learn_side_by_side_runs_the_cleanrl_learner():
    rows = run([str(EXAMPLES / "learn_side_by_side.py"), "--config", TINY, "--only",
                "cleanrl", "--max-steps", "1024", "--target", "2.0"])
    (row,) = rows
    assert row["learner"] == "cleanrl_ppo.py" and not row["reached"]
    assert 0 < row["ratio"] <= row["best_ratio"] + 1e-9 and row["oracle_return"] > 0
    # Every env step counts: the greedy evaluations' (20-step episodes on tiny.yaml) too.
    assert row["training_steps"] >= 1024 and row["search_steps"] == 0
    assert row["env_steps"] > row["training_steps"]
    assert (row["env_steps"] - row["training_steps"]) % 20 == 0


def test_learn_side_by_side_runs_the_cpp_learner():
    exe = cli_or_skip()
    out = subprocess.run([sys.executable, str(EXAMPLES / "learn_side_by_side.py"), "--config",
                          TINY, "--only", "cpp", "--max-steps", "1024", "--target", "2.0",
                          "--shardgym", exe], capture_output=True, text=True,
                         env=dict(os.environ), timeout=600)
    if out.returncode != 0 and "needs LibTorch" in out.stderr:
        pytest.skip("this build has no LibTorch, so no C++ PPO")
    assert out.returncode == 0, out.stderr
    (row,) = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert row["learner"].startswith("C++ PPO") and not row["reached"]
    assert row["oracle_return"] > 0
    assert row["env_steps"] > row["training_steps"] >= 1024
