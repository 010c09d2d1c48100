"""Traces (HDF5, schema `shardgym-trace` v1, docs/trace-format.md) as numpy episodes, and
their export to a Minari dataset.

    trace = shardgym.datasets.load("runs/quickstart/trace.h5")
    ep = trace.episodes[0]            # dict: observations (N+1, D), actions (N, A), rewards,
                                      # terminations, truncations, plans, metrics/..., attrs
    shardgym.datasets.to_minari("runs/quickstart/trace.h5", "shardgym/quickstart-ppo-v0",
                                config="experiments/quickstart.yaml")

h5py parses the file in this process: unlike the C++ reader (datasets/isolated_read.h), a
damaged file can crash it, so load only traces you trust.
"""
import dataclasses

import h5py
import numpy as np

FORMAT, VERSION = "shardgym-trace", 1
_PER_STEP = ("observations", "actions", "rewards", "terminations", "truncations", "plans")


@dataclasses.dataclass
class Trace:
    attrs: dict          # root attributes: env_id, config (YAML text), git_sha, created, ...
    strategies: list     # /strategies: plans[t, b] indexes this list
    episodes: list       # complete episodes in recording order, each a dict of numpy arrays
    incomplete: list     # names of episodes whose `complete` attribute is 0 (not read)


def _attrs(obj):
    return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in obj.attrs.items()}


def _require_self_contained(f, path):
    """Refuses, before any data is read, a link that is not a hard link (an external link to
    another file, a soft link) and a dataset whose data is not in the file (HDF5 external
    storage, a virtual dataset), as the C++ reader does (datasets/h5_util.h)."""
    def walk(group, prefix):
        for name in group:
            link = group.get(name, getlink=True)
            where = f"{prefix}/{name}"
            if not isinstance(link, h5py.HardLink):
                raise ValueError(f"{path}: '{where}' is a {type(link).__name__}; a trace holds "
                                 f"its data itself and no link leaves it")
            obj = group[name]
            if isinstance(obj, h5py.Group):
                walk(obj, where)
            elif obj.is_virtual or obj.external:
                raise ValueError(f"{path}: dataset '{where}' keeps its data outside the file "
                                 f"({'virtual dataset' if obj.is_virtual else 'external storage'})")
    walk(f, "")


def load(path):
    """Every complete episode of the trace at `path` (docs/trace-format.md's completeness
    rule: episodes with complete = 0 are listed in `incomplete`, not read)."""
    with h5py.File(path, "r") as f:
        _require_self_contained(f, path)
        attrs = _attrs(f)
        if attrs.get("format") != FORMAT:
            raise ValueError(f"{path}: not a {FORMAT} file (format={attrs.get('format')!r})")
        if int(attrs.get("version", -1)) != VERSION:
            raise ValueError(f"{path}: {FORMAT} version {attrs.get('version')}, "
                             f"this reader knows {VERSION}")
        strategies = [s.rstrip(b"\0").decode() for s in f["strategies"][()]] \
            if "strategies" in f else []
        group = f.get("episodes", {})
        names = sorted(group, key=lambda n: int(n.rsplit("_", 1)[1]))
        episodes, incomplete = [], []
        for name in names:
            g = group[name]
            if int(g.attrs.get("complete", 0)) != 1:
                incomplete.append(name)
                continue
            ep = {key: g[key][()] for key in _PER_STEP if key in g}
            for sub in ("metrics", "scalars"):
                if sub in g:
                    ep[sub] = {k: g[sub][k][()] for k in g[sub]}
            ep["attrs"] = _attrs(g)
            ep["name"] = name
            episodes.append(ep)
    return Trace(attrs, strategies, episodes, incomplete)


def to_minari(path, dataset_id, config, algorithm_name=None, author=None, description=None):
    """Writes the trace's complete episodes as the Minari dataset `dataset_id` (e.g.
    "shardgym/quickstart-megatron-v0", under MINARI_DATASETS_PATH) and returns it.

    Observations are the trace's flat float32 vectors (Box(0, inf, (D,))); the action space
    is the env's (MultiDiscrete), built from `config`, the experiment the trace was recorded
    with. Per-step infos carry the plan (catalog ids) and the step's latency."""
    import minari
    from gymnasium import spaces
    from minari.data_collector import EpisodeBuffer

    import _shardgym
    from shardgym.env import _experiment, env_flags

    trace = load(path)
    if not trace.episodes:
        raise ValueError(f"{path}: no complete episode to export")
    env_id = trace.attrs.get("env_id")
    if env_id in _shardgym.env_ids() and env_flags(env_id)["needs_trace"]:
        raise ValueError(f"traces of {env_id} cannot be exported: it plays back another trace "
                         "(export that one)")
    exp = _experiment(env_id, config, {})
    spec = _shardgym.Env(exp.env_id, exp).spec()
    dim = trace.episodes[0]["observations"].shape[1]
    if dim != spec["observation_size"]:
        raise ValueError(f"{path}: observations have {dim} features, the env of {config} "
                         f"{spec['observation_size']}: not the config it was recorded with")
    observation_space = spaces.Box(0.0, np.inf, (dim,), np.float32)
    action_space = spaces.MultiDiscrete(np.asarray(spec["action_nvec"], dtype=np.int64))
    buffers = []
    for i, ep in enumerate(trace.episodes):
        n = len(ep["rewards"])
        buffers.append(EpisodeBuffer(
            id=i, seed=int(ep["attrs"].get("seed", 0)),
            observations=ep["observations"].astype(np.float32),
            actions=ep["actions"].astype(np.int64),
            rewards=ep["rewards"].astype(np.float64).tolist(),
            terminations=ep["terminations"].astype(bool).tolist(),
            truncations=ep["truncations"].astype(bool).tolist(),
            infos={"plan": ep["plans"].astype(np.int64),
                   "step_latency_s": ep["metrics"]["step_latency_s"].astype(np.float64)}
            if n > 0 else {}))
    agents = sorted({ep["attrs"].get("agent", "") for ep in trace.episodes})
    return minari.create_dataset_from_buffers(
        dataset_id, buffers, observation_space=observation_space, action_space=action_space,
        algorithm_name=algorithm_name or ",".join(agents), author=author,
        description=description or f"{trace.attrs.get('env_id')} trace {path} "
                                   f"(git {trace.attrs.get('git_sha')})",
        data_format="hdf5")
