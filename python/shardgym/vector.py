"""shardgym.vector: N envs stepped together on C++ threads (env/vector_env.h), one call per
step whatever N is, results as numpy arrays; a gymnasium.vector.VectorEnv.

    venv = shardgym.vector.make("shardgym/TPSim-v0", num_envs=8, config="quickstart")
    obs, info = venv.reset(seed=0)          # env i is seeded with seed + i
    obs, rew, term, trunc, info = venv.step(actions)   # actions (N, A) ints

Also `gymnasium.make_vec("shardgym/TPSim-v0", num_envs=8, vectorization_mode=
"vector_entry_point", config="quickstart")`.

Observations are the single env's Dict with a leading N axis. Autoreset is Gymnasium's
same-step mode (metadata["autoreset_mode"] = AutoresetMode.SAME_STEP): an env that ends is
reset within the step, continuing its seed sequence; its last observation is in
info["final_obs"] and the ended step's info in info["final_info"] where info["_final_obs"] /
info["_final_info"] are True. info["action_mask_flat"] is (N, M) bool (read-only; per env,
`shardgym.split_mask(row, nvec)` gives Gymnasium's tuple layout). A masked entry keeps the
entry in force, as in the single env, and info["refused"] (N, A) flags it. Every info key k
comes with Gymnasium's "_k", the envs that have it.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np
import gymnasium
from gymnasium.utils import seeding
from gymnasium.error import ClosedEnvironmentError
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

import _shardgym
from shardgym.env import _experiment, checked_actions, spaces_of


class VectorEnv(gymnasium.vector.VectorEnv):
    """N copies of one registered env, stepped by the C++ VectorEnv on `threads` threads.

    reset(seed=s) seeds env i with s + i; reset() without a seed draws a fresh base seed
    from the vector env's own generator (itself seeded by the first seeded reset, or at
    random), so two resets give two different sets of episodes.
    """

    metadata: Dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, env_id: str, num_envs: int, config: Union[str, os.PathLike, None] = None,
                 threads: int = 0, **options: Any) -> None:
        options.pop("masked_action", None)  # the vector env always keeps the entry in force
        self.env_id = env_id
        self.experiment = _experiment(env_id, config, options)
        self._venv = _shardgym.VectorEnv(env_id, self.experiment, int(num_envs), int(threads))
        probe = self._venv.spec()
        self.num_envs = int(num_envs)
        self.env_spec: Dict[str, Any] = probe
        self.catalog_size: int = probe["catalog_size"]
        self.action_nvec = np.asarray(probe["action_nvec"], dtype=np.int64)
        # Gymnasium's VectorEnv attributes: one env's spaces, and the same with a leading N axis.
        self.single_observation_space, self.single_action_space = spaces_of(probe)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.render_mode = None
        self.closed = False

    def _live(self) -> "_shardgym.VectorEnv":
        if self._venv is None:
            raise ClosedEnvironmentError(f"{self.env_id}: the vector env is closed "
                                         "(step/reset after close())")
        return self._venv

    # The extension builds the observation Dict (one view per part of the flat buffer, "plan"
    # as int64 with catalog_size for a strategy outside the catalog) and the info dict itself.
    def reset(self, *, seed: Optional[int] = None,
              options: Optional[Dict[str, Any]] = None) -> Tuple[Dict[str, np.ndarray],
                                                                 Dict[str, Any]]:
        """Resets every env: env i with seed + i; seed=None draws the base seed from
        self.np_random. No options."""
        if options:
            raise ValueError(f"{self.env_id}: reset takes no options, got {sorted(options)}")
        venv = self._live()
        if seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(seed)
        else:
            seed = int(self.np_random.integers(0, 2**62))
        return venv.reset(int(seed))

    def step(self, actions: Any) -> Tuple[Dict[str, np.ndarray], np.ndarray, np.ndarray,
                                          np.ndarray, Dict[str, Any]]:
        """Steps every env with its row of `actions` (N, A); see the module docstring."""
        venv = self._live()
        actions = checked_actions(actions, self.action_nvec)
        return venv.step(np.ascontiguousarray(actions, dtype=np.int32))

    def action_masks(self) -> np.ndarray:
        """(N, M) flat bool masks (sb3-contrib's layout, one row per env)."""
        return self._live().action_masks()

    def close_extras(self, **kwargs: Any) -> None:
        """Drops the C++ envs (Gymnasium's close() calls this once)."""
        self._venv = None


def make(env_id: str, num_envs: int, config: Union[str, os.PathLike, None] = None,
         threads: int = 0, **options: Any) -> VectorEnv:
    """N copies of env `env_id` (options as gymnasium.make's) on `threads` C++ threads
    (0: min(N, cores))."""
    return VectorEnv(env_id, num_envs, config=config, threads=threads, **options)
