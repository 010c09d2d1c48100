"""Hand-made inputs of `shardgym report` whose statistics are known in advance: a suite JSON
with per-episode records and learning.csv files of `shardgym train` runs."""
import json
import math
from pathlib import Path

from shardgym.report_learning import HEADER

INSTANCES = list(range(6))
TASKS = ("alpha", "beta")


def _factor(agent, seed, instance):
    """Throughput over hindsight-static's on the same instance."""
    if agent == "megatron":
        return 0.8
    if agent == "dynamic-oracle":
        return 1.1
    if agent == "replan":
        return 1.02 if instance % 2 == 0 else 0.99  # above the reference on half the instances
    if agent.startswith("ppo"):
        return 0.9 + 0.05 * seed
    return 1.0


def suite_json(path, agents=("megatron", "hindsight-static", "dynamic-oracle", "replan",
                             "ppo(polish=0)"), drop=()):
    """Writes a suite JSON (2 tasks x 6 instances; ppo with training seeds 0 and 1); `drop`:
    (task, agent) pairs left without episodes."""
    episodes, rows = [], []
    for task in TASKS:
        for agent in agents:
            if (task, agent) in drop:
                continue
            seeds = (0, 1) if agent.startswith("ppo") else (-1,)
            logs = []
            for seed in seeds:
                for i in INSTANCES:
                    f = _factor(agent, seed, i)
                    episodes.append({"task": task, "agent": agent, "training_seed": seed,
                                     "instance": i, "throughput": (100.0 + 10 * i) * f,
                                     "repartition_s": 0.0, "wall_s": 0.01, "failed": False})
                    logs.append(math.log(f))
            g = math.exp(sum(logs) / len(logs))
            rows.append({"task": task, "agent": agent, "runs": len(seeds),
                         "vs_megatron": {"point": g / 0.8, "low": g / 0.8 - 0.01,
                                         "high": g / 0.8 + 0.01, "n": len(INSTANCES)},
                         "vs_hindsight": {"point": g, "low": g - 0.01, "high": g + 0.01,
                                          "n": len(INSTANCES)},
                         "gain_share": 0.5, "failed": 0})
    data = {"suite": "synthetic", "test_instances": INSTANCES, "agents": list(agents),
            "rows": rows, "overall": [], "runs": [], "episodes": episodes}
    Path(path).write_text(json.dumps(data))
    return path


def learning_csv(folder, rows, header=HEADER, newline_at_end=True):
    """Writes folder/learning.csv from (update, training, env, wall, eval, train) tuples
    (train None: an empty field)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lines = [header] + [",".join("" if v is None else str(v) for v in r) for r in rows]
    (folder / "learning.csv").write_text("\n".join(lines) + ("\n" if newline_at_end else ""))
    return folder / "learning.csv"


def seed_run(folder, level, updates=8, env_per_update=1000, wall_per_update=0.5, offset=0):
    """A run whose greedy return is `level` + the update number (train return one less),
    each update `env_per_update` env steps and `wall_per_update` s later."""
    rows = [(u, u * 900, offset + u * env_per_update, round(u * wall_per_update, 3),
             level + u, None if u == 1 else level + u - 1) for u in range(1, updates + 1)]
    return learning_csv(folder, rows)
