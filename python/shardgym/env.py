"""ShardGymEnv: one C++ env (make_env: TimeLimit ∘ NormalizeReward) behind Gymnasium's API.

Observation (Dict): the C++ env's named parts of its flat float32 vector ("blocks" (B, F),
"global", "links", "shares" with `data_shares` groups, and "pipeline" with p > 1 stages;
meanings in `part_meanings`) plus "plan", the plan in force as catalog indices (B,) reported
by C++ (K = not in the catalog). Action: MultiDiscrete([K] * B (+ [M])), M the plan-level
component's choices (pipeline moves, data shares). The mask is the flat bool array over the
concatenated choices (sb3-contrib's MaskablePPO layout), in info["action_mask"] and
action_masks().
"""
import os

import numpy as np
import gymnasium
from gymnasium import spaces

import _shardgym

# Options of this Python wrapper itself. Every other keyword option is one the env's C++
# registration declares (env/registry.h): its name, type, default and meaning come from there.
WRAPPER_OPTIONS = {
    "config": "path of the experiment YAML (required), e.g. experiments/quickstart.yaml",
    "masked_action": "\"truncate\" (default: the episode ends, truncated, reward 0, "
                     "info['error'] says why) or \"raise\" (ValueError, the C++ contract)",
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
                        "(e.g. config=\"experiments/quickstart.yaml\")")
    exp = _shardgym.load_experiment(str(config))
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


def split_mask(mask, nvec):
    """The flat mask as a tuple of per-dimension int8 masks (MultiDiscrete.sample(mask=...))."""
    bounds = np.cumsum(nvec)[:-1]
    return tuple(m.astype(np.int8) for m in np.split(np.asarray(mask), bounds))


class ShardGymEnv(gymnasium.Env):
    metadata = {"render_modes": []}

    def __init__(self, env_id, config=None, render_mode=None, **options):
        if render_mode is not None:
            raise ValueError(f"{env_id}: no render modes (got render_mode={render_mode!r})")
        self._masked_action = options.pop("masked_action", "truncate")
        if self._masked_action not in ("truncate", "raise"):
            raise ValueError(f"masked_action must be 'truncate' or 'raise', "
                             f"got {self._masked_action!r}")
        self.experiment = _experiment(env_id, config, options)
        self._env = _shardgym.Env(env_id, self.experiment)
        spec = self._env.spec()
        self.env_spec = spec  # the C++ EnvSpec as a dict (ids, sizes, parts, catalog)
        self.catalog = list(spec["catalog"])
        self.num_blocks = spec["num_blocks"]
        self._parts = [(p["name"], p["offset"], tuple(p["shape"]))
                       for p in spec["observation_parts"]]
        self.part_meanings = {p["name"]: p["meaning"] for p in spec["observation_parts"]}
        self.observation_space, self.action_space = spaces_of(spec)
        self._seeded = False
        self._last_obs = None
        self._mask = None

    # -- helpers --------------------------------------------------------------------------
    def _obs(self, flat, plan_indices):
        obs = {name: flat[off:off + int(np.prod(shape))].reshape(shape)
               for name, off, shape in self._parts}
        plan = np.asarray(plan_indices, dtype=np.int64)
        obs["plan"] = np.where(plan < 0, self.env_spec["catalog_size"], plan)
        return obs

    def _info(self, info):
        info = dict(info)
        self._mask = self._env.action_mask()
        info["action_mask"] = self._mask
        return info

    # -- Gymnasium API --------------------------------------------------------------------
    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is None and not self._seeded:
            # Gymnasium: an unseeded first reset is random; later ones continue the sequence.
            seed = int(self.np_random.integers(0, 2**31 - 1))
        self._seeded = True
        flat, info = self._env.reset(seed)
        self._last_obs = self._obs(flat, info["plan_indices"])
        return self._last_obs, self._info(info)

    def step(self, action):
        action = checked_actions(action, self.action_space.nvec)
        if self._masked_action == "truncate" and self._mask is not None:
            bad = self._masked_entry(action)
            if bad is not None:
                return self._last_obs, 0.0, False, True, {
                    "error": f"masked action: {bad}", "action_mask": self._mask}
        flat, reward, terminated, truncated, info = self._env.step(action.astype(np.int32))
        self._last_obs = self._obs(flat, info["plan_indices"])
        return self._last_obs, float(reward), bool(terminated), bool(truncated), self._info(info)

    def close(self):
        # Drops the C++ env now (a live run's ranks stop here, not at garbage collection).
        self._env = None

    def action_masks(self):
        """Flat bool mask over the concatenated MultiDiscrete choices (MaskablePPO)."""
        return self._env.action_mask()

    def _masked_entry(self, action):
        nvec = self.action_space.nvec
        if action.shape != nvec.shape or np.any(action < 0) or np.any(action >= nvec):
            return None  # out of the space: the C++ env raises ValueError naming the entry
        starts = np.concatenate(([0], np.cumsum(nvec)[:-1]))
        allowed = self._mask[starts + action]
        if allowed.all():
            return None
        d = int(np.argmin(allowed))
        what = f"block {d}" if d < self.num_blocks else "the plan-level component (pipeline moves, data shares)"
        return f"{what}: choice {int(action[d])} is not allowed now"
