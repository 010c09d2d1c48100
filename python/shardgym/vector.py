"""shardgym.vector: N envs stepped together on C++ threads (env/vector_env.h), one call per
step whatever N is, results as numpy arrays.

    venv = shardgym.vector.make("shardgym/TPSim-v0", num_envs=8,
                                config="experiments/quickstart.yaml")
    obs, info = venv.reset(seed=0)          # env i is seeded with seed + i
    obs, rew, term, trunc, info = venv.step(actions)   # actions (N, A) ints

Observations are the single env's Dict with a leading N axis. Envs that end are reset at
once (autoreset, continuing their seed sequence); their last observation is in
info["final_obs"] where info["_final"] is True. info["action_mask"] is (N, M) bool. A masked
action raises ValueError (the C++ contract; the lowest env index is reported).
"""
import numpy as np
from gymnasium.vector.utils import batch_space

import _shardgym
from shardgym.env import _experiment, checked_actions, spaces_of


class VectorEnv:
    def __init__(self, env_id, num_envs, config=None, threads=0, **options):
        options.pop("masked_action", None)  # the vector env always raises
        self.experiment = _experiment(env_id, config, options)
        self._venv = _shardgym.VectorEnv(env_id, self.experiment, int(num_envs), int(threads))
        probe = self._venv.spec()
        self.num_envs = int(num_envs)
        self.env_spec = probe
        self.catalog_size = probe["catalog_size"]
        self.action_nvec = np.asarray(probe["action_nvec"], dtype=np.int64)
        # Gymnasium's VectorEnv attributes: one env's spaces, and the same with a leading N axis.
        self.single_observation_space, self.single_action_space = spaces_of(probe)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    # The extension builds the observation Dict (one view per part of the flat buffer, "plan"
    # as int64 with catalog_size for a strategy outside the catalog) and the info dict itself.
    def reset(self, seed=0):
        return self._venv.reset(int(seed))

    def step(self, actions):
        actions = checked_actions(actions, self.action_nvec)
        return self._venv.step(np.ascontiguousarray(actions, dtype=np.int32))

    def action_masks(self):
        return self._venv.action_masks()

    def close(self):
        self._venv = None


def make(env_id, num_envs, config=None, threads=0, **options):
    """N copies of env `env_id` (options as gymnasium.make's) on `threads` C++ threads
    (0: min(N, cores))."""
    return VectorEnv(env_id, num_envs, config=config, threads=threads, **options)
