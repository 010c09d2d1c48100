"""Records every episode MaskablePPO (sb3-contrib) plays while it trains on a ShardGym config,
as a Minari dataset: the mixed-quality episodes that offline RL learns from.

    .venv/bin/python examples/python/record_training.py --config tiny --steps 4096 \\
        --dataset-id shardgym/tiny-maskableppo-v0 [--datasets-path DIR]

The learner trains on shardgym.datasets.recorder(config): the env of
gymnasium.make("shardgym/TPSim-v0", config=...) inside a minari.DataCollector. Its own wrappers
(maskable_ppo.py's observation filter and ActionMasker) go outside the recorder, so the dataset
holds the env's full Dict observation. shardgym.datasets.create_dataset then writes the
episodes with the env spec and the reference scores (the `random` and `oracle` agents), so
minari.get_normalized_score tells how good each training episode was. Any other Python
learner records the same way: train it on the recorder.

Prints one JSON line: the env steps and episodes the learner played, the steps and episodes
the dataset holds (the same: an episode cut short by the end of training is recorded as
truncated), and the mean normalised score of the first and of the last complete episodes.
"""
import argparse
import json
import os
import time

import minari
import numpy as np
import torch
from gymnasium.wrappers import FilterObservation
from sb3_contrib import MaskablePPO
from sb3_contrib.common.wrappers import ActionMasker
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv

import shardgym.datasets


class CountEpisodes(BaseCallback):
    """Counts the episodes the learner plays, from its own view of the env (dones)."""

    def __init__(self):
        super().__init__()
        self.complete, self.steps_since_reset = 0, 0

    def _on_step(self):
        done = bool(self.locals["dones"][0])
        self.complete += done
        self.steps_since_reset = 0 if done else self.steps_since_reset + 1
        return True


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="tiny", help="a path or a shipped config's name")
    p.add_argument("--dataset-id", default="shardgym/tiny-maskableppo-v0",
                   help="namespace/name-vN")
    p.add_argument("--datasets-path", help="where Minari keeps datasets "
                   "(MINARI_DATASETS_PATH; default Minari's own, ~/.minari/datasets)")
    p.add_argument("--steps", type=int, default=4096, help="env steps of training")
    p.add_argument("--n-steps", type=int, default=256, help="rollout length")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--gamma", type=float, default=0.0, help="as maskable_ppo.py, which says why")
    p.add_argument("--seed", type=int, default=0, help="training seed (and the first reset's)")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    return p.parse_args(argv)


def record(args):
    """Trains on the recorder and writes the dataset; returns the summary as a dict."""
    torch.set_num_threads(args.threads)
    start = time.time()
    recorder = shardgym.datasets.recorder(args.config)
    venv = DummyVecEnv([lambda: ActionMasker(FilterObservation(recorder, ["global", "links"]),
                                             lambda e: e.unwrapped.action_masks())])
    model = MaskablePPO("MultiInputPolicy", venv, learning_rate=args.lr, n_steps=args.n_steps,
                        batch_size=args.batch_size, n_epochs=args.epochs, gamma=args.gamma,
                        seed=args.seed, verbose=0)
    count = CountEpisodes()
    model.learn(total_timesteps=args.steps, callback=count)
    dataset = shardgym.datasets.create_dataset(
        recorder, args.dataset_id, algorithm_name=f"MaskablePPO (sb3-contrib), training "
        f"seed {args.seed}, {model.num_timesteps} steps")
    recorder.close()
    full = dataset.spec.env_spec.max_episode_steps
    complete = [ep for ep in dataset.iterate_episodes()
                if ep.terminations[-1] or len(ep.rewards) == full]
    scores = minari.get_normalized_score(dataset, np.array([ep.rewards.sum() for ep in complete]))
    k = max(1, len(scores) // 5)
    meta = dataset.storage.metadata
    return {"dataset_id": args.dataset_id, "steps": model.num_timesteps,
            "episodes_played": count.complete + (count.steps_since_reset > 0),
            "dataset_steps": dataset.total_steps, "dataset_episodes": dataset.total_episodes,
            "ref_min_score": round(meta["ref_min_score"], 4),
            "ref_max_score": round(meta["ref_max_score"], 4),
            "first_score": round(float(scores[:k].mean()), 4) if len(scores) else None,
            "last_score": round(float(scores[-k:].mean()), 4) if len(scores) else None,
            "wall_s": round(time.time() - start, 1)}


def main():
    args = parse_args()
    if args.datasets_path:
        os.environ["MINARI_DATASETS_PATH"] = os.path.abspath(args.datasets_path)
    print(json.dumps(record(args)), flush=True)


if __name__ == "__main__":
    main()
