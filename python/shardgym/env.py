"""ShardGymEnv: one C++ env (make_env: TimeLimit ∘ NormalizeReward) behind Gymnasium's API.

Observation (Dict): the C++ env's named parts of its flat float32 vector ("blocks" (B, F),
"global", "links", "shares" with `data_shares` groups, and "pipeline" with p > 1 stages;
meanings in `part_meanings`) plus "plan", the plan in force as catalog indices (B,) reported
by C++ (K = not in the catalog). Action: MultiDiscrete([K] * B (+ [M])), M the plan-level
component's choices (pipeline moves, data shares).

Every action in the action space is a legal input to `step`: an entry the mask forbids is
refused, not applied: that block (or the plan-level component) keeps the entry in force, the
step goes on with the other entries, and info["refused"] flags the refused entries (as
CompilerGym reports an illegal action without ending the episode). masked_action="raise"
gives the C++ contract instead (ValueError).

Masks in two layouts: info["action_mask"] is Gymnasium's, a tuple of per-component int8
arrays for `env.action_space.sample(mask=info["action_mask"])`; info["action_mask_flat"] and
action_masks() are sb3-contrib's MaskablePPO one, a flat bool array over the concatenated
choices (through wrappers: `env.get_wrapper_attr("action_masks")()`).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, List, Optional, SupportsFloat, Tuple, Union

import numpy as np
import gymnasium
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec
from gymnasium.error import ClosedEnvironmentError

import _shardgym
from shardgym import configs

# Options of this Python wrapper itself. Every other keyword option is one the env's C++
# registration declares (env/registry.h): its name, type, default and meaning come from there.
WRAPPER_OPTIONS = {
    "config": "experiment YAML (required): a path, or a shipped config's name, e.g. "
              "\"quickstart\" (shardgym.configs.names())",
    "masked_action": "\"keep\" (default: a masked entry keeps the entry in force, "
                     "info['refused'] flags it) or \"raise\" (ValueError, the C++ contract)",
}


def _described(option):
    return f"{option['type']}: {option['doc']} (default {option['default']!r})"


# The options every env takes, with their meaning (the wrapper's and the common C++ ones).
OPTIONS = dict(WRAPPER_OPTIONS, **{o["name"]: _described(o) for o in _shardgym.common_options()})


def env_options(env_id):
    """Keyword options of gymnasium.make(env_id, ...) from the env's C++ registration: name ->
    dict(type, default, doc, config_key[, min, max]), the common ones first."""
    return {o["name"]: o for o in _shardgym.env_info(env_id)["options"]}


def env_flags(env_id):
    """The registration's flags: deterministic, platform_dependent, needs_libtorch,
    needs_trace, real_run."""
    return dict(_shardgym.env_info(env_id)["flags"])


def _check_options(env_id, options):
    allowed = set(WRAPPER_OPTIONS) | (set(env_options(env_id)) if env_id else set(OPTIONS))
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise TypeError(f"{env_id or 'shardgym'}: unknown option(s) {', '.join(unknown)}; "
                        f"allowed: {', '.join(sorted(allowed))}")


def _coerce(env_id, name, option, value):
    """The value as the option's C++ type; TypeError naming the option otherwise (ranges are
    checked in C++, which raises ValueError naming the config key)."""
    kind = option["type"]
    ok = {"bool": isinstance(value, (bool, np.bool_)),
          "int": isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)),
          "double": isinstance(value, (int, float, np.integer, np.floating))
          and not isinstance(value, (bool, np.bool_)),
          "string": isinstance(value, str),
          "path": isinstance(value, (str, os.PathLike))}[kind]
    if not ok:
        raise TypeError(f"{env_id}: option {name} takes a {kind} "
                        f"({option['doc']}), got {value!r}")
    return {"bool": bool, "int": int, "double": float, "string": str,
            "path": os.fspath}[kind](value)


def _experiment(env_id, config, options):
    if env_id is not None:
        _check_options(env_id, dict(options, config=config))
    if config is None:
        raise TypeError(f"{env_id or 'shardgym'}: config=PATH is required "
                        "(a path, or a shipped config's name, e.g. config=\"quickstart\")")
    exp = _shardgym.load_experiment(configs.resolve(config))
    if env_id is None:
        _check_options(exp.env_id, options)
    else:
        exp.env_id = env_id
    declared = env_options(exp.env_id)
    for name, value in options.items():
        if name in WRAPPER_OPTIONS:
            continue
        _shardgym.set_option(exp, name, _coerce(exp.env_id, name, declared[name], value))
    _shardgym.validate_experiment(exp)  # the env's own check (e.g. a replay needs its trace)
    return exp


def checked_actions(actions, nvec):
    """`actions` (one action, or a batch along the leading axis) as int64, refused with
    ValueError unless every entry is a whole number in [0, nvec[d]): NaN, inf, 2.5 or 2**32 + 3
    would otherwise wrap or truncate into a valid choice when cast to the C++ env's int32
    (docs/robustness.md, "Information and messages")."""
    a = np.asarray(actions)
    nvec = np.asarray(nvec, dtype=np.int64)
    if a.dtype == np.bool_ or a.dtype.kind not in "iuf":
        raise ValueError(f"action must hold integers, got dtype {a.dtype}")
    if a.shape[-1:] != nvec.shape:
        raise ValueError(f"action must have {nvec.shape[0]} entries per env, got shape {a.shape}")
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a) | (a != np.floor(a))
        if bad.any():
            raise ValueError(f"action entry {np.argwhere(bad)[0].tolist()} = "
                             f"{a[tuple(np.argwhere(bad)[0])]!r} is not a whole number")
    out_of_range = (a < 0) | (a >= nvec)
    if out_of_range.any():
        at = tuple(np.argwhere(out_of_range)[0])
        raise ValueError(f"action entry {list(at)} = {a[at]!r} is outside [0, {nvec[at[-1]]})")
    return a.astype(np.int64)


def spaces_of(spec):
    """(observation_space, action_space) of one env from its C++ EnvSpec (as `spec()` gives it):
    a Dict of the named observation parts, the plan in force as integers, and the
    MultiDiscrete action."""
    parts = {p["name"]: spaces.Box(0.0, np.inf, tuple(p["shape"]), np.float32)
             for p in spec["observation_parts"]}
    # K stands for "not in the catalog" (C++ reports -1), so the space stays MultiDiscrete.
    parts["plan"] = spaces.MultiDiscrete(
        np.full(spec["num_blocks"], spec["catalog_size"] + 1, dtype=np.int64))
    return (spaces.Dict(parts),
            spaces.MultiDiscrete(np.asarray(spec["action_nvec"], dtype=np.int64)))


def split_mask(mask: np.ndarray, nvec: np.ndarray) -> Tuple[np.ndarray, ...]:
    """The flat mask as a tuple of per-dimension int8 masks (MultiDiscrete.sample(mask=...)):
    views of one int8 copy. Rows of a reshape where every dimension has the same size (the
    blocks alone), slices otherwise; `np.split` took half of a step's time on 64 blocks."""
    flat = np.asarray(mask).astype(np.int8)
    sizes = np.asarray(nvec, dtype=np.int64).ravel()
    if sizes.size and flat.size == sizes.size * int(sizes[0]) and (sizes == sizes[0]).all():
        return tuple(flat.reshape(sizes.size, int(sizes[0])))
    ends = np.cumsum(sizes).tolist()
    return tuple(flat[start:end] for start, end in zip([0] + ends[:-1], ends))


def refuse_masked(action: np.ndarray, mask: np.ndarray, plan_indices: np.ndarray,
                  num_blocks: int, nvec: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(the action with every entry the flat `mask` forbids replaced by the entry in force,
    the refused entries as a bool array). As the C++ env checks (env/partition_env.cpp): a
    block's entry equal to its plan in force is always accepted, and so is the plan-level
    component's choice 0 (keep). ValueError if a refused block has no catalog entry in force
    (plan index -1), since no action can then keep it."""
    starts = np.concatenate(([0], np.cumsum(nvec)[:-1]))
    in_force = np.zeros(len(nvec), dtype=np.int64)
    in_force[:num_blocks] = plan_indices
    refused = ~mask[starts + action] & (action != in_force)
    if not refused.any():
        return action, refused
    if (in_force[refused] < 0).any():
        d = int(np.flatnonzero(refused & (in_force < 0))[0])
        raise ValueError(f"block {d}: choice {int(action[d])} is masked and the block's strategy "
                         "in force is outside the catalog, so it cannot be kept")
    return np.where(refused, in_force, action), refused


# Pickling replays the episode in force on a fresh env (deterministic envs only); this many
# steps since the last seeded reset at most, beyond which pickle asks for reset(seed=...).
MAX_REPLAY_STEPS = 100_000


class ShardGymEnv(gymnasium.Env):
    """One registered C++ env (TPSim, TPReplay, TPLive) as a Gymnasium env.

    Built from an experiment config (a path or a shipped config's name) and the options its
    C++ registration declares (OPTIONS, env_options(env_id)); the episode is the C++ env's,
    truncated after the config's steps_per_episode (also spec.max_episode_steps). See the
    module docstring for the observation, the action, the masks and refused entries.

    Pickle and deepcopy rebuild the env from its config and, for a deterministic env,
    replay the episode in force (its seeded reset and the actions since), checking that the
    observation comes out the same; a non-deterministic env (a live run) pickles only before
    its first reset, and says so.
    """

    metadata: Dict[str, Any] = {"render_modes": []}

    def __init__(self, env_id: str, config: Union[str, os.PathLike, None] = None,
                 render_mode: Optional[str] = None, **options: Any) -> None:
        if render_mode is not None:
            raise ValueError(f"{env_id}: no render modes (got render_mode={render_mode!r})")
        self._init_args = (env_id, config, dict(options))
        self._masked_action = options.pop("masked_action", "keep")
        if self._masked_action not in ("keep", "raise"):
            raise ValueError(f"masked_action must be 'keep' or 'raise', "
                             f"got {self._masked_action!r}")
        self.experiment = _experiment(env_id, config, options)
        self._env = _shardgym.Env(env_id, self.experiment)
        spec = self._env.spec()
        self.env_spec: Dict[str, Any] = spec  # the C++ EnvSpec (ids, sizes, parts, catalog)
        self.catalog: List[str] = list(spec["catalog"])
        self.num_blocks: int = spec["num_blocks"]
        self._parts = [(p["name"], p["offset"], tuple(p["shape"]))
                       for p in spec["observation_parts"]]
        self.part_meanings: Dict[str, str] = {p["name"]: p["meaning"]
                                              for p in spec["observation_parts"]}
        self.observation_space, self.action_space = spaces_of(spec)
        self._deterministic = env_flags(env_id)["deterministic"]
        self._spec: Optional[EnvSpec] = EnvSpec(
            id=env_id, entry_point="shardgym.env:ShardGymEnv",
            kwargs=dict(self._init_args[2], config=config))
        self._seeded = False
        self._last_obs: Optional[Dict[str, np.ndarray]] = None
        self._mask: Optional[np.ndarray] = None
        self._plan_indices: Optional[np.ndarray] = None
        self._replay: Optional[Tuple[int, List[np.ndarray]]] = None  # (seed, actions since)

    # -- spec: Gymnasium's, with the episode length of the config -------------------------
    @property
    def spec(self) -> Optional[EnvSpec]:
        """Gymnasium's EnvSpec (set by gymnasium.make); max_episode_steps is the config's
        steps_per_episode, at which the C++ env truncates, and nondeterministic the
        registration's flag (a live run is; check_env then skips its determinism checks)."""
        if self._spec is None:
            return None
        return dataclasses.replace(self._spec,
                                   max_episode_steps=int(self.experiment.steps_per_episode),
                                   nondeterministic=not self._deterministic)

    @spec.setter
    def spec(self, value: Optional[EnvSpec]) -> None:
        self._spec = value

    # -- helpers --------------------------------------------------------------------------
    def _live(self) -> "_shardgym.Env":
        if self._env is None:
            raise ClosedEnvironmentError(f"{self._init_args[0]}: the env is closed "
                                         "(step/reset after close())")
        return self._env

    def _obs(self, flat: np.ndarray, plan_indices: np.ndarray) -> Dict[str, np.ndarray]:
        obs = {name: flat[off:off + int(np.prod(shape))].reshape(shape)
               for name, off, shape in self._parts}
        plan = np.asarray(plan_indices, dtype=np.int64)
        obs["plan"] = np.where(plan < 0, self.env_spec["catalog_size"], plan)
        return obs

    def _info(self, info: Dict[str, Any], refused: Optional[np.ndarray] = None) -> Dict[str, Any]:
        info = dict(info)
        self._mask = self._env.action_mask()
        self._plan_indices = np.asarray(info["plan_indices"], dtype=np.int64)
        info["action_mask"] = split_mask(self._mask, self.action_space.nvec)
        info["action_mask_flat"] = self._mask
        info["refused"] = (np.zeros(len(self.action_space.nvec), dtype=bool)
                           if refused is None else refused)
        return info

    # -- Gymnasium API --------------------------------------------------------------------
    def reset(self, *, seed: Optional[int] = None,
              options: Optional[Dict[str, Any]] = None) -> Tuple[Dict[str, np.ndarray],
                                                                 Dict[str, Any]]:
        """Starts an episode. seed seeds the simulator's noise and scenario; None continues
        the seed sequence (the first reset ever without a seed draws one). No options."""
        if options:
            raise ValueError(f"{self._init_args[0]}: reset takes no options, got "
                             f"{sorted(options)}")
        env = self._live()
        super().reset(seed=seed)
        if seed is None and not self._seeded:
            # Gymnasium: an unseeded first reset is random; later ones continue the sequence.
            seed = int(self.np_random.integers(0, 2**31 - 1))
        self._seeded = True
        flat, info = env.reset(seed)
        self._log_reset(seed)
        self._last_obs = self._obs(flat, info["plan_indices"])
        return self._last_obs, self._info(info)

    def step(self, action: Any) -> Tuple[Dict[str, np.ndarray], SupportsFloat, bool, bool,
                                         Dict[str, Any]]:
        """One step. An entry the mask forbids keeps the entry in force (info["refused"]),
        or raises ValueError with masked_action="raise"; an action outside the space raises
        ValueError; after close() ClosedEnvironmentError."""
        env = self._live()
        action = checked_actions(action, self.action_space.nvec)
        refused = None
        if self._masked_action == "keep" and self._mask is not None:
            action, refused = refuse_masked(action, self._mask, self._plan_indices,
                                            self.num_blocks, self.action_space.nvec)
        flat, reward, terminated, truncated, info = env.step(action.astype(np.int32))
        if self._replay is not None:
            self._replay[1].append(action.astype(np.int32))
        self._last_obs = self._obs(flat, info["plan_indices"])
        return (self._last_obs, float(reward), bool(terminated), bool(truncated),
                self._info(info, refused))

    def close(self) -> None:
        """Drops the C++ env now (a live run's ranks stop here, not at garbage collection)."""
        self._env = None

    def action_masks(self) -> np.ndarray:
        """Flat bool mask over the concatenated MultiDiscrete choices (MaskablePPO)."""
        return self._live().action_mask()

    # -- pickle / deepcopy: config + replay of the episode in force -----------------------
    def _log_reset(self, seed: Optional[int]) -> None:
        if seed is not None:
            self._replay = (int(seed), [])
        elif self._replay is not None:
            self._replay[1].append(None)  # reset(None): continue the seed sequence

    def __getstate__(self) -> Dict[str, Any]:
        replay = self._replay
        if replay is not None and not self._deterministic:
            raise TypeError(f"{self._init_args[0]} is not deterministic: a started episode "
                            "cannot be rebuilt, so it cannot be pickled or copied")
        if replay is not None and len(replay[1]) > MAX_REPLAY_STEPS:
            raise TypeError(f"{self._init_args[0]}: {len(replay[1])} steps since the last "
                            f"seeded reset (at most {MAX_REPLAY_STEPS} are replayed); call "
                            "reset(seed=...) before pickling")
        return {"init": self._init_args, "closed": self._env is None, "replay": replay,
                "np_random": self._np_random, "seeded": self._seeded, "spec": self._spec,
                "last_obs": self._last_obs}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        env_id, config, options = state["init"]
        self.__init__(env_id, config, **options)
        self._spec = state["spec"]
        if state["replay"] is not None and not state["closed"]:
            seed, steps = state["replay"]
            self._replay_episode(seed, steps, state["last_obs"])
        self._np_random = state["np_random"]
        self._seeded = state["seeded"]
        if state["closed"]:
            self.close()

    def _replay_episode(self, seed: int, steps: List[Optional[np.ndarray]],
                        expected: Dict[str, np.ndarray]) -> None:
        self.reset(seed=seed)
        for a in steps:
            if a is None:
                self.reset()
            else:
                self.step(a)
        for name, value in expected.items():
            if not np.array_equal(self._last_obs[name], value):
                raise RuntimeError(f"{self._init_args[0]}: replaying the pickled episode gave "
                                   f"another observation ('{name}'); the env is not "
                                   "reproducible here")
