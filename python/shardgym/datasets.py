"""Traces (HDF5, schema `shardgym-trace` v1, docs/trace-format.md) as numpy episodes, and
Minari datasets of shardgym episodes: exported from a trace, or recorded while a Python
learner trains.

    trace = shardgym.datasets.load("runs/quickstart/trace.h5")
    ep = trace.episodes[0]            # dict: observations (N+1, D), actions (N, A), rewards,
                                      # terminations, truncations, plans, metrics/..., attrs
    shardgym.datasets.to_minari("runs/quickstart/trace.h5", "shardgym/quickstart-megatron-v0",
                                config="quickstart")

    env = shardgym.datasets.recorder("tiny")      # a minari.DataCollector around the env
    ...                                           # any learner trains on env
    shardgym.datasets.create_dataset(env, "shardgym/tiny-maskableppo-v0")

A dataset has the env's own spaces (the Dict observation, the MultiDiscrete action), its
env spec and eval env spec (`recover_environment()` builds the env again, with the config
by its shipped name where it is one, else by its absolute path) and reference scores: the
mean returns of the C++ `random` (ref_min_score) and `oracle` (ref_max_score) agents on the
same config over REFERENCE_SEEDS, so `minari.get_normalized_score` gives 0 for random play
and 1 for the oracle's. A failed write leaves no dataset folder behind.

h5py parses the file in this process: unlike the C++ reader (datasets/isolated_read.h), a
damaged file can crash it, so load only traces you trust.
"""
import contextlib
import dataclasses
import functools
import importlib.metadata
import os
import pathlib
import re
import shutil

import h5py
import numpy as np

FORMAT, VERSION = "shardgym-trace", 1
_PER_STEP = ("observations", "actions", "rewards", "terminations", "truncations", "plans")

# Seeds of the reference episodes (the `random` and `oracle` agents) whose mean returns are a
# dataset's ref_min_score and ref_max_score: the same for every dataset of one config, so
# normalised scores of datasets of that config compare.
REFERENCE_SEEDS = tuple(range(10))

# Minari's dataset id, (namespace/)name-vN, with the version required: an id without one is
# written by Minari but then breaks minari.list_local_datasets() for every dataset.
_DATASET_ID = re.compile(r"(?:(?P<namespace>[-\w]+(?:/[-\w]+)*)/)?(?P<name>[-\w]+?)"
                         r"-v(?P<version>\d+)")
_INSTALL = "pip install 'shardgym[datasets]'"


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
            if "reset" in g:
                ep["reset"] = _attrs(g["reset"])  # the measurement reported by reset
            ep["attrs"] = _attrs(g)
            ep["name"] = name
            episodes.append(ep)
    return Trace(attrs, strategies, episodes, incomplete)


# -- Minari -------------------------------------------------------------------------------
def _minari():
    try:
        import minari
    except ImportError as e:
        raise ImportError(f"Minari datasets need the `datasets` extra ({_INSTALL}): {e}") from e
    return minari


def check_dataset_id(dataset_id):
    """(namespace or None, name, version) of a Minari dataset id, "namespace/name-vN" (the
    namespace, itself possibly nested, is optional); ValueError naming the id otherwise. The
    id is checked before anything is written, against Minari's own rules too."""
    _minari()
    if not isinstance(dataset_id, str):
        raise TypeError(f"dataset id must be a str, got {dataset_id!r}")
    match = _DATASET_ID.fullmatch(dataset_id)
    if not match:
        raise ValueError(f"dataset id {dataset_id!r} is not of the form namespace/name-vN "
                         "(e.g. 'shardgym/quickstart-megatron-v0': letters, digits, '-' and "
                         "'_', an optional namespace before a '/', and a version)")
    namespace, name, version = match.group("namespace", "name", "version")
    from minari.dataset.minari_dataset import parse_dataset_id
    from minari.namespace import validate_namespace
    try:
        parse_dataset_id(dataset_id)
        if namespace is not None:
            validate_namespace(namespace)
    except (TypeError, ValueError) as e:
        raise ValueError(f"dataset id {dataset_id!r}: Minari refuses it: {e}") from e
    return namespace, name, int(version)


def _dataset_path(dataset_id):
    from minari.storage import get_dataset_path
    return pathlib.Path(get_dataset_path(dataset_id))


def _new_dataset_path(dataset_id):
    """The folder of the dataset `dataset_id`, after checking the id and that no dataset of
    that id exists (FileExistsError)."""
    check_dataset_id(dataset_id)
    path = _dataset_path(dataset_id)
    if path.exists():
        raise FileExistsError(f"dataset {dataset_id} already exists at {path}: choose another "
                              f"version, or delete it with minari.delete_dataset('{dataset_id}')")
    return path


@contextlib.contextmanager
def _no_partial_dataset(dataset_id):
    """Checks the id and that no dataset of that id exists; if the body fails (or is
    interrupted), removes what it wrote: the dataset folder and namespace folders it made
    that hold nothing else, so a retry starts clean."""
    path = _new_dataset_path(dataset_id)
    root = _dataset_path("")
    parents = [p for p in path.parents if root in p.parents]  # namespace folders
    made = [p for p in parents if not p.exists()]
    try:
        yield
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        for folder in made:  # deepest first
            leftover = set(os.listdir(folder)) if folder.is_dir() else set()
            if leftover <= {"namespace_metadata.json"}:
                shutil.rmtree(folder, ignore_errors=True)
        raise


def portable_config(config):
    """`config` as a dataset's env spec names it: a shipped config by its name ("quickstart"),
    which resolves wherever shardgym is installed, any other file by its absolute path."""
    from shardgym import configs
    resolved = configs.resolve(config)
    real = os.path.realpath(resolved)
    for name in configs.names():
        if os.path.realpath(configs.directory() / f"{name}.yaml") == real:
            return name
    return os.path.abspath(resolved)


def _make_env(env_id, config, options):
    """gymnasium.make of the env (the config's own where env_id is None), with the config
    as portable_config names it."""
    import gymnasium
    from shardgym.env import _experiment
    env_id = env_id or _experiment(None, config, dict(options)).env_id
    options = {k: (os.fspath(v) if isinstance(v, os.PathLike) else v)
               for k, v in options.items()}  # the spec is stored as JSON
    return gymnasium.make(env_id, config=portable_config(config), **options)


def reference_scores(config, env_id=None, seeds=REFERENCE_SEEDS, **options):
    """(ref_min_score, ref_max_score): the mean returns of the C++ `random` and `oracle`
    agents on `config`'s env (or `env_id`'s), with the env's `options`, over `seeds`."""
    import _shardgym
    from shardgym.env import _experiment
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("reference scores need at least one seed")
    exp = _experiment(env_id, config, dict(options))
    ref = {agent: float(np.mean([_shardgym.run_agent(agent, exp, s)["return"] for s in seeds]))
           for agent in ("random", "oracle")}
    if not ref["oracle"] > ref["random"]:
        raise ValueError(f"{config}: the oracle's mean return {ref['oracle']:.6g} is not above "
                         f"random play's {ref['random']:.6g} (seeds {seeds}): no normalised "
                         "score can be defined")
    return ref["random"], ref["oracle"]


def _references(config, env_id, seeds, options):
    """reference_scores, or (None, None) where seeds is None: no reference scores (for a
    live env, say, where each reference episode is a real training run)."""
    if seeds is None:
        return None, None
    return reference_scores(config, env_id, seeds, **options)


def _requirements():
    try:
        return [f"shardgym=={importlib.metadata.version('shardgym')}"]
    except importlib.metadata.PackageNotFoundError:  # a source checkout on PYTHONPATH
        return None


def _split_plan(text, num_blocks):
    """Strategy names, one per block, of a plan text (runtime/core/plan.h's forms:
    uniform:S, attn=S|mlp=S, S;S;... with K*S repeats; the @pp/@dp parts are not per block)."""
    blocks = text.split("@", 1)[0].strip()
    if blocks.startswith("uniform:"):
        names = [blocks[len("uniform:"):].strip()] * num_blocks
    elif blocks.startswith("attn="):
        attn, sep, mlp = blocks[len("attn="):].partition("|mlp=")
        if not sep or num_blocks % 2:
            raise ValueError("expected attn=STRATEGY|mlp=STRATEGY over an even block count")
        names = [attn.strip(), mlp.strip()] * (num_blocks // 2)
    else:
        names = _split_entries(blocks, num_blocks)
    if "" in names:
        raise ValueError("a block has no strategy")
    return names


def _split_entries(blocks, num_blocks):
    """The names of "S;S;..." with K*S repeats, exactly num_blocks of them."""
    names = []
    for item in blocks.split(";"):
        star, paren = item.find("*"), item.find("(")
        count, body = 1, item
        if star >= 0 and (paren < 0 or star < paren):
            digits = item[:star].strip()
            if not re.fullmatch(r"[0-9]{1,6}", digits) or int(digits) < 1:
                raise ValueError(f"bad repeat count {digits!r}")
            count, body = int(digits), item[star + 1:]
        if not body.strip() or len(names) + count > num_blocks:
            raise ValueError(f"expected {num_blocks} non-empty entries")
        names += [body.strip()] * count
    if len(names) != num_blocks:
        raise ValueError(f"{len(names)} entries, the model has {num_blocks} blocks")
    return names


def _episode_buffer(i, ep, path, cpp_spec, nvec, lut, catalog_index):
    """One trace episode as Minari's EpisodeBuffer in the env's spaces, after checking its
    shapes and actions (the trace is input: a bad one is refused by name)."""
    from minari.data_collector import EpisodeBuffer
    where = f"{path}: {ep['name']}"
    missing = [k for k in _PER_STEP if k not in ep]
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)}")
    n, blocks, size = len(ep["rewards"]), cpp_spec["num_blocks"], cpp_spec["catalog_size"]
    expected = {"observations": (n + 1, cpp_spec["observation_size"]),
                "actions": (n, len(nvec)), "rewards": (n,), "terminations": (n,),
                "truncations": (n,), "plans": (n, blocks)}
    for key, shape in expected.items():
        if ep[key].shape != shape:
            raise ValueError(f"{where}: {key} has shape {ep[key].shape}, the env's "
                             f"{shape}: not the config it was recorded with")
    actions = ep["actions"]
    if actions.dtype.kind not in "iu" or ((actions < 0) | (actions >= nvec)).any():
        raise ValueError(f"{where}: actions outside the env's action space {nvec.tolist()}")
    plans = ep["plans"]
    if plans.dtype.kind not in "iu" or ((plans < -1) | (plans >= len(lut))).any():
        raise ValueError(f"{where}: plans hold ids outside the strategies table "
                         f"({len(lut)} entries)")
    try:
        initial = _split_plan(str(ep["attrs"].get("initial_plan", "")), blocks)
    except ValueError as e:
        raise ValueError(f"{where}: initial_plan {ep['attrs'].get('initial_plan')!r}: "
                         f"{e}") from None
    if ep["attrs"].get("seed") is None:
        raise ValueError(f"{where} has no seed attribute")
    flat = ep["observations"].astype(np.float32, copy=False)
    obs = {p["name"]: flat[:, p["offset"]:p["offset"] + int(np.prod(p["shape"]))]
           .reshape((n + 1,) + tuple(p["shape"])) for p in cpp_spec["observation_parts"]}
    # The plan in force at reset, then after each step; K: not in the catalog, or id -1
    # (not reported), which indexes the K appended to the table's catalog indices.
    obs["plan"] = np.concatenate([
        np.array([[catalog_index.get(s, size) for s in initial]], dtype=np.int64),
        np.append(lut, size)[plans]]).astype(np.int64)
    latency = ep.get("metrics", {}).get("step_latency_s")
    infos = {}
    if latency is not None and latency.shape == (n,):
        first = np.asarray(ep.get("reset", {}).get("step_latency_s", np.nan), dtype=np.float64)
        infos["step_latency_s"] = np.concatenate([first.reshape(1), latency]).astype(np.float64)
    return EpisodeBuffer(
        id=i, seed=int(ep["attrs"]["seed"]), observations=obs,
        actions=actions.astype(np.int64), rewards=ep["rewards"].astype(np.float64).tolist(),
        terminations=ep["terminations"].astype(bool).tolist(),
        truncations=ep["truncations"].astype(bool).tolist(), infos=infos or None)


def _same_obs(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def to_minari(path, dataset_id, config, algorithm_name=None, author=None, description=None,
              author_email=None, code_permalink=None, reference_seeds=REFERENCE_SEEDS):
    """Writes the trace's complete episodes as the Minari dataset `dataset_id`
    ("namespace/name-vN", e.g. "shardgym/quickstart-megatron-v0", under
    MINARI_DATASETS_PATH) and returns it (a minari.MinariDataset).

    `config` is the experiment the trace was recorded with (a path or a shipped config's
    name). The dataset has the env's spaces: the trace's flat observations become the env's
    Dict observation (the named parts and "plan", the plan in force as catalog indices), its
    actions the env's MultiDiscrete ones. env_spec and eval_env_spec make the trace's env
    (its id, this config) for `recover_environment()`; ref_min_score and ref_max_score are
    the mean returns of the `random` and `oracle` agents over `reference_seeds` (None: none
    recorded, e.g. for a live env, where each reference episode is a real run). Per-step
    infos: step_latency_s (row 0 the reset's). For a deterministic env every episode's first
    observation must be the env's at reset with the episode's seed, or the export is refused
    (the config is not the one it was recorded with). Nothing is left behind on failure."""
    minari = _minari()
    import _shardgym
    from shardgym.env import env_flags

    _new_dataset_path(dataset_id)  # refused before any work; checked again when writing
    trace = load(path)
    if not trace.episodes:
        raise ValueError(f"{path}: no complete episode to export")
    env_id = trace.attrs.get("env_id")
    if env_id not in _shardgym.env_ids():
        raise ValueError(f"{path}: env {env_id!r} is not registered in this build "
                         f"({', '.join(_shardgym.env_ids())})")
    if env_flags(env_id)["needs_trace"]:
        raise ValueError(f"traces of {env_id} cannot be exported: it plays back another trace "
                         "(export that one)")
    env = _make_env(env_id, config, {})
    try:
        shardgym_env = env.unwrapped
        cpp_spec = shardgym_env.env_spec
        dim = trace.episodes[0]["observations"].shape[-1]
        if dim != cpp_spec["observation_size"]:
            raise ValueError(f"{path}: observations have {dim} features, the env of {config} "
                             f"{cpp_spec['observation_size']}: not the config it was recorded "
                             "with")
        catalog_index = {name: k for k, name in enumerate(cpp_spec["catalog"])}
        lut = np.array([catalog_index.get(s, cpp_spec["catalog_size"])
                        for s in trace.strategies], dtype=np.int64)
        nvec = np.asarray(env.action_space.nvec)
        buffers = [_episode_buffer(i, ep, path, cpp_spec, nvec, lut, catalog_index)
                   for i, ep in enumerate(trace.episodes)]
        if env_flags(env_id)["deterministic"]:
            for b, ep in zip(buffers, trace.episodes):
                first = {k: v[0] for k, v in b.observations.items()}
                if not _same_obs(env.reset(seed=b.seed)[0], first):
                    raise ValueError(f"{path}: {ep['name']}'s first observation is not the "
                                     f"env's at reset with seed {b.seed} on {config}: not the "
                                     "config it was recorded with")
        spec = env.spec
        observation_space, action_space = env.observation_space, env.action_space
    finally:
        env.close()
    ref_min, ref_max = _references(config, env_id, reference_seeds, {})
    agents = sorted({str(ep["attrs"].get("agent", "")) for ep in trace.episodes})
    with _no_partial_dataset(dataset_id):
        try:
            return minari.create_dataset_from_buffers(
                dataset_id, buffers, env=spec, eval_env=spec,
                observation_space=observation_space, action_space=action_space,
                algorithm_name=algorithm_name or ",".join(agents), author=author,
                author_email=author_email, code_permalink=code_permalink,
                ref_min_score=ref_min, ref_max_score=ref_max,
                description=description or f"{env_id} on {spec.kwargs['config']}: trace "
                                           f"{path} (git {trace.attrs.get('git_sha')})",
                data_format="hdf5", requirements=_requirements())
        except ImportError as e:
            raise ImportError(f"writing a Minari dataset needs the `datasets` extra "
                              f"({_INSTALL}): {e}") from e


# -- recording the episodes a learner plays -----------------------------------------------
@functools.lru_cache(maxsize=None)
def _recorder_class():
    minari = _minari()

    class Recorder(minari.DataCollector):
        """minari.DataCollector whose unseeded resets, after a seeded one, get seeds drawn
        from a generator seeded by that seed: a learner seeded once records the same
        episodes on every run (Minari alone draws a fresh random seed at each such reset).
        Every episode keeps its seed in the dataset, so it can be played again."""

        _seeds = None

        def reset(self, *, seed=None, options=None):
            if seed is not None:
                self._seeds = np.random.default_rng(int(seed))
            elif self._seeds is not None:
                seed = int(self._seeds.integers(0, 2**32))
            return super().reset(seed=seed, options=options)

    return Recorder


def recorder(config, env_id=None, **options):
    """The shardgym env `gymnasium.make(env_id, config=config, **options)` (env_id None: the
    config's own env, e.g. shardgym/TPSim-v0) wrapped in a
    minari.DataCollector: every step any learner (or other caller) plays through it is
    recorded, episode by episode, with the env's own observation (wrap observation filters
    outside it). Write the dataset with create_dataset(recorder, dataset_id); an episode cut
    short by the end of training is recorded as truncated (Minari's rule). Masks are reached
    as on the env: `env.unwrapped.action_masks()`, `info["action_mask"]`."""
    Recorder = _recorder_class()
    from minari.data_collector import EpisodeBuffer
    try:  # what DataCollector.step needs (minari[create]: jax), before any training starts
        EpisodeBuffer(observations=0).add_step_data(
            {"observation": 0, "action": 0, "reward": 0.0, "terminated": False,
             "truncated": False, "info": {}})
    except ImportError as e:
        raise ImportError(f"recording with minari.DataCollector needs the `datasets` extra "
                          f"({_INSTALL}): {e}") from e
    except Exception:  # another Minari's step layout: the recorder will tell if it fails
        pass
    return Recorder(_make_env(env_id, config, options))


def create_dataset(collectors, dataset_id, algorithm_name=None, author=None,
                   author_email=None, code_permalink=None, description=None,
                   reference_seeds=REFERENCE_SEEDS):
    """Writes the episodes recorded by `collectors` (one minari.DataCollector around a
    shardgym env, as recorder() makes, or a list of them, e.g. one per env of a vector env,
    all of the same env id, config and options) as the Minari dataset `dataset_id`
    ("namespace/name-vN") and returns it; the collectors are emptied, as
    DataCollector.create_dataset does, and record on. Its eval env is the recorded env;
    ref_min_score and ref_max_score are the mean returns of the `random` and `oracle` agents
    on that config over `reference_seeds` (None: none recorded). Nothing is left behind on
    failure."""
    minari = _minari()
    from shardgym.env import ShardGymEnv
    collectors = list(collectors) if isinstance(collectors, (list, tuple)) else [collectors]
    _new_dataset_path(dataset_id)
    if not collectors:
        raise ValueError("create_dataset needs at least one collector")
    specs = []
    for c in collectors:
        if not isinstance(c, minari.DataCollector) or not isinstance(c.unwrapped, ShardGymEnv):
            raise TypeError(f"{c!r} is not a minari.DataCollector around a shardgym env "
                            "(shardgym.datasets.recorder makes one)")
        specs.append(c.env.spec)
    if any(s != specs[0] for s in specs):
        raise ValueError("the collectors record different envs (env id, config or options): "
                         f"{sorted({s.to_json() for s in specs})}")
    env_id, config, options = collectors[0].unwrapped._init_args
    ref_min, ref_max = _references(config, env_id, reference_seeds, options)
    with _no_partial_dataset(dataset_id):
        try:
            dataset = collectors[0].create_dataset(
                dataset_id, eval_env=specs[0], algorithm_name=algorithm_name, author=author,
                author_email=author_email, code_permalink=code_permalink,
                ref_min_score=ref_min, ref_max_score=ref_max,
                description=description or f"episodes played on {env_id}, config "
                                           f"{specs[0].kwargs['config']}",
                requirements=_requirements())
            for c in collectors[1:]:
                c.add_to_dataset(dataset)
        except ImportError as e:
            raise ImportError(f"writing a Minari dataset needs the `datasets` extra "
                              f"({_INSTALL}): {e}") from e
    return dataset
