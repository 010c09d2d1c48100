"""ShardGym from Python: every registered C++ env as a Gymnasium env.

    import gymnasium, shardgym
    env = gymnasium.make("shardgym/TPSim-v0", config="experiments/quickstart.yaml")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample(
        mask=shardgym.split_mask(info["action_mask"], env.action_space.nvec)))

Which envs exist depends on the build: TPSim and TPReplay always, TPLive in LibTorch builds
only (see docs/python.md).
"""
import gymnasium

import _shardgym

from shardgym.env import OPTIONS, ShardGymEnv, split_mask  # noqa: F401

__all__ = ["ShardGymEnv", "OPTIONS", "env_ids", "agent_names", "run_agent", "split_mask",
           "load_experiment"]


def env_ids():
    """The env ids this build registered (sorted)."""
    return list(_shardgym.env_ids())


def agent_names():
    """The agent names this build registered (oracle, megatron, greedy, ...)."""
    return list(_shardgym.agent_names())


def load_experiment(config, **options):
    """An experiment config as the C++ loader reads it, with `options` (OPTIONS) applied."""
    from shardgym.env import _experiment
    return _experiment(None, config, options)


def run_agent(agent, config, seed=0, **options):
    """One evaluation episode of a registered C++ agent (e.g. "oracle", "megatron") on the
    config's env; returns a dict with "return", "throughput", "steps", "final_plan", ..."""
    return dict(_shardgym.run_agent(agent, load_experiment(config, **options), seed))


for _id in _shardgym.env_ids():
    if _id not in gymnasium.registry:
        gymnasium.register(_id, entry_point="shardgym.env:ShardGymEnv", kwargs={"env_id": _id},
                           disable_env_checker=False)
