"""ShardGym from Python: every registered C++ env as a Gymnasium env.

    import gymnasium, shardgym
    env = gymnasium.make("shardgym/TPSim-v0", config="quickstart")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(
        env.action_space.sample(mask=info["action_mask"]))

Which envs exist depends on the build: TPSim and TPReplay always, TPLive in LibTorch builds
only (see docs/python.md).
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Union

import gymnasium

import _shardgym

from shardgym import configs  # noqa: F401
from shardgym.env import OPTIONS, ShardGymEnv, split_mask  # noqa: F401

__all__ = ["ShardGymEnv", "OPTIONS", "env_ids", "agent_names", "run_agent", "split_mask",
           "load_experiment", "configs", "HELD_OUT_SEED"]

# Evaluation seeds start here (agents/evaluate.h, kHeldOutSeedBase): the C++ learners' training
# envs draw seeds below 2^30 and Python examples train on small seeds, so a greedy evaluation
# on HELD_OUT_SEED + k never replays a training episode.
HELD_OUT_SEED = 2 ** 31


def env_ids() -> List[str]:
    """The env ids this build registered (sorted)."""
    return list(_shardgym.env_ids())


def agent_names() -> List[str]:
    """The agent names this build registered (oracle, megatron, greedy, ...)."""
    return list(_shardgym.agent_names())


def load_experiment(config: Union[str, os.PathLike], **options: Any) -> "_shardgym.Experiment":
    """An experiment config as the C++ loader reads it, with `options` (OPTIONS) applied."""
    from shardgym.env import _experiment
    return _experiment(None, config, options)


def run_agent(agent: str, config: Union[str, os.PathLike], seed: int = 0,
              **options: Any) -> Dict[str, Any]:
    """One evaluation episode of a registered C++ agent (e.g. "oracle", "megatron") on the
    config's env; returns a dict with "return", "throughput", "steps", "final_plan", ..."""
    return dict(_shardgym.run_agent(agent, load_experiment(config, **options), seed))


for _id in _shardgym.env_ids():
    if _id not in gymnasium.registry:
        # vector_entry_point: gymnasium.make_vec(id, num_envs, vectorization_mode=
        # "vector_entry_point", config=...) builds shardgym.vector's VectorEnv.
        gymnasium.register(_id, entry_point="shardgym.env:ShardGymEnv", kwargs={"env_id": _id},
                           vector_entry_point="shardgym.vector:VectorEnv",
                           nondeterministic=not _shardgym.env_info(_id)["flags"]["deterministic"],
                           disable_env_checker=False)
