"""PPO from RLlib (Ray 2.60, new API stack, torch) on a ShardGym env.

    .venv/bin/python examples/python/rllib_ppo.py [--config tiny] [--iterations 20]

RLlib is not installed by python/requirements.txt (that installs Ray core for
shardgym.distributed). `pip install "ray[rllib]==2.60.0"` would downgrade gymnasium to the
1.2.2 it pins, and pull pyarrow 26, which refuses numpy 1.24; RLlib 2.60 runs on gymnasium
1.4.0 and Debian's torch 1.13 with its other packages installed without their dependencies
(they need nothing else beyond what python/requirements.txt and Debian give):

    .venv/bin/pip install "ray[client]==2.60.0"
    .venv/bin/pip install --no-deps dm-tree==0.1.10 pyarrow==20.0.0 fsspec==2026.9.0 \\
        ormsgpack==1.13.1 tensorboardX==2.6.5

The env is gymnasium.make("shardgym/TPSim-v0", config=...) with its Dict observation flattened
(FlattenObservation; RLlib's default model is an MLP). The action is the env's MultiDiscrete
one; RLlib's default PPO has no action masks, which this env does not need: an entry the mask
forbids is refused (that block keeps its strategy in force, info["refused"] says so) and the
step goes on, so every sampled action is legal. Gamma is 0 by default, as in
examples/python/cleanrl_ppo.py (a plan change's repartition is charged to the same step).

Ray: without --address a Ray is started for this run on 127.0.0.1 (shardgym.distributed's
local start); with --address the env runners run on the cluster, whose workers must import
`shardgym` (the package and its extension on their PYTHONPATH).

Prints one JSON line per training iteration, then the greedy policy's return on
--eval-seed next to the C++ `oracle` and `megatron` agents' returns on the same seed.
"""
import argparse
import json
import time

import numpy as np

import shardgym
from shardgym import distributed

ENV_NAME = "shardgym-flat"


def make_env(env_config):
    import gymnasium
    import shardgym  # noqa: F401,F811  registers the envs in an env runner's process
    env = gymnasium.make(env_config.get("env_id", "shardgym/TPSim-v0"),
                         config=env_config["config"])
    return gymnasium.wrappers.FlattenObservation(env)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="tiny", help="experiment config: a path or a shipped "
                   "config's name (default: %(default)s)")
    p.add_argument("--iterations", type=int, default=20, help="RLlib training iterations")
    p.add_argument("--batch", type=int, default=400, help="env steps per iteration")
    p.add_argument("--minibatch", type=int, default=100)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--gamma", type=float, default=0.0)
    p.add_argument("--num-env-runners", type=int, default=0,
                   help="remote env runners (0: sample in this process)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-seed", type=int, default=shardgym.HELD_OUT_SEED,
                   help="seed of the greedy evaluation episode (default 2^31: no training "
                   "episode's seed)")
    p.add_argument("--address", help="a running Ray cluster (default: a local Ray on "
                   "127.0.0.1 for this run)")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray")
    return p.parse_args(argv)


def greedy_return(module, config, seed):
    """One episode with the most likely action of every component."""
    import torch
    env = make_env({"config": config})
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    dist_cls = module.get_inference_action_dist_cls()
    while not done:
        with torch.no_grad():
            out = module.forward_inference(
                {"obs": torch.as_tensor(np.asarray(obs, dtype=np.float32)[None])})
        action = dist_cls.from_logits(out["action_dist_inputs"]).to_deterministic().sample()
        obs, reward, terminated, truncated, _ = env.step(action[0].numpy())
        total += float(reward)
        done = terminated or truncated
    return total


def main(argv=None):
    args = parse_args(argv)
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.tune.registry import register_env

    ray, started, where = distributed.start_ray(args.address, args.num_cpus)
    try:
        print(json.dumps({"ray": where, "config": args.config}), flush=True)
        register_env(ENV_NAME, make_env)
        config = (PPOConfig()
                  .environment(ENV_NAME, env_config={"config": args.config})
                  .framework("torch")
                  .env_runners(num_env_runners=args.num_env_runners,
                               rollout_fragment_length="auto")
                  .training(train_batch_size_per_learner=args.batch,
                            minibatch_size=args.minibatch, num_epochs=args.epochs,
                            lr=args.lr, gamma=args.gamma)
                  .debugging(seed=args.seed))
        algo = config.build_algo()
        start = time.time()
        for i in range(args.iterations):
            r = algo.train()
            print(json.dumps({
                "iteration": i + 1,
                "env_steps": int(r["num_env_steps_sampled_lifetime"]),
                "episode_return_mean": round(float(
                    r["env_runners"].get("episode_return_mean", float("nan"))), 3),
                "wall_s": round(time.time() - start, 1)}), flush=True)
        ret = greedy_return(algo.get_module(), args.config, args.eval_seed)
        oracle = shardgym.run_agent("oracle", args.config, seed=args.eval_seed)["return"]
        megatron = shardgym.run_agent("megatron", args.config, seed=args.eval_seed)["return"]
        print(json.dumps({"greedy_return": round(ret, 3), "oracle_return": round(oracle, 3),
                          "megatron_return": round(megatron, 3),
                          "ratio_to_oracle": round(ret / oracle, 4),
                          "wall_s": round(time.time() - start, 1)}), flush=True)
        algo.stop()
    finally:
        if started:
            ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
