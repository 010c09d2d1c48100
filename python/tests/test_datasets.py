"""shardgym.datasets: traces as numpy episodes, and Minari datasets (exported from a trace,
or recorded while a learner trains) that Minari's own API opens: the env's spaces and spec,
reference scores, no partial folder on failure, checked ids."""
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

import shardgym
import shardgym.datasets
from conftest import ROOT, cli_or_skip

TINY = str(ROOT / "experiments" / "tiny.yaml")


def test_load_gives_numpy_episodes(trace, quickstart):
    t = shardgym.datasets.load(trace)
    assert t.attrs["format"] == "shardgym-trace" and t.attrs["env_id"] == "shardgym/TPSim-v0"
    assert len(t.episodes) == 1 and t.incomplete == []
    ep = t.episodes[0]
    n = len(ep["rewards"])
    assert n == 50 and ep["observations"].shape == (n + 1, 488)
    assert ep["observations"].dtype == np.float32 and ep["actions"].shape == (n, 48)
    assert ep["attrs"]["agent"] == "megatron" and ep["attrs"]["seed"] == 0
    assert ep["metrics"]["step_latency_s"].shape == (n,)
    # Plans index the strategies table; Megatron keeps tp1d(t=8) throughout.
    assert {t.strategies[i] for i in ep["plans"].ravel()} == {"tp1d(t=8)"}
    # The recorded return is what the Megatron agent gets on the same seed.
    ret = shardgym.run_agent("megatron", quickstart, seed=0)["return"]
    assert ep["rewards"].sum() == pytest.approx(ret, rel=1e-9)


@pytest.mark.parametrize("kind", ["external_link", "external_storage", "virtual"])
def test_load_refuses_data_outside_the_trace(trace, tmp_path, kind):
    """episode_0/rewards replaced by data from outside the file, holding the same values:
    refused by name before it is read (the C++ reader refuses it too, datasets/h5_util.h)."""
    copy = tmp_path / "t.h5"
    shutil.copy(trace, copy)
    src = tmp_path / "source.h5"
    with h5py.File(copy, "r+") as f:
        rewards = f["episodes/episode_0/rewards"][()]
        del f["episodes/episode_0/rewards"]
        with h5py.File(src, "w") as s:
            s["rewards"] = rewards
        if kind == "external_link":
            f["episodes/episode_0/rewards"] = h5py.ExternalLink(str(src), "rewards")
        elif kind == "external_storage":
            raw = tmp_path / "raw.bin"
            rewards.astype("<f8").tofile(raw)
            f.create_dataset("episodes/episode_0/rewards", shape=rewards.shape, dtype="<f8",
                             external=[(str(raw), 0, rewards.nbytes)])
        else:
            layout = h5py.VirtualLayout(shape=rewards.shape, dtype="<f8")
            layout[:] = h5py.VirtualSource(str(src), "rewards", shape=rewards.shape)
            f.create_virtual_dataset("episodes/episode_0/rewards", layout)
    with pytest.raises(ValueError, match="rewards"):
        shardgym.datasets.load(str(copy))


# -- Minari datasets ----------------------------------------------------------------------
try:
    import minari
except ImportError:  # the `datasets` extra is not installed: the Minari tests skip
    minari = None
# Minari's advice to name an author, an email and a permalink is not what these tests check.
pytestmark = pytest.mark.filterwarnings("ignore:`(author|author_email|code_permalink)`")
QUICKSTART = "quickstart"  # the shipped config, by name


@pytest.fixture
def datasets_path(tmp_path, monkeypatch):
    """An empty MINARI_DATASETS_PATH for the test."""
    if minari is None:
        pytest.skip("no minari (the `datasets` extra)")
    path = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(path))
    return path


@pytest.fixture(scope="session")
def tiny_traces(tmp_path_factory):
    """Traces of the `oracle` and `random` agents on tiny.yaml, seeds 0-9 (the reference seeds:
    their mean returns are the datasets' reference scores), recorded by the CLI."""
    exe = cli_or_skip(" to record a trace")
    out = tmp_path_factory.mktemp("tiny-traces")
    seeds = [str(s) for s in shardgym.datasets.REFERENCE_SEEDS]
    subprocess.run([exe, "compare", TINY, "--agents", "oracle,random", "--seeds", *seeds,
                    "--no-references", "--out", str(out)], check=True, capture_output=True)
    return {agent: str(out / f"{agent}.h5") for agent in ("oracle", "random")}


def replay(env, seed, actions):
    """The observations and rewards of `actions` played from reset(seed) on `env`."""
    obs, _ = env.reset(seed=int(seed))
    observations, rewards = [obs], []
    for a in actions:
        obs, r, _, _, _ = env.step(a)
        observations.append(obs)
        rewards.append(r)
    return observations, np.array(rewards)


def assert_episode_is_the_envs(env, ds, ep):
    """The dataset's episode is what the env gives for its seed and actions, step by step."""
    seed = next(iter(ds.storage.get_episode_metadata([ep.id])))["seed"]
    observations, rewards = replay(env, seed, ep.actions)
    for t, obs in enumerate(observations):
        for key, value in obs.items():
            np.testing.assert_array_equal(ep.observations[key][t], value, err_msg=f"{key}[{t}]")
    np.testing.assert_allclose(ep.rewards, rewards, rtol=1e-12)


def test_to_minari_writes_the_envs_spaces_spec_and_episodes(trace, datasets_path):
    shardgym.datasets.to_minari(trace, "shardgym/quickstart-megatron-v0",
                                config="experiments/quickstart.yaml")
    ds = minari.load_dataset("shardgym/quickstart-megatron-v0")
    assert ds.total_episodes == 1 and ds.total_steps == 50
    assert list(minari.list_local_datasets()) == ["shardgym/quickstart-megatron-v0"]
    # The env spec names the shipped config by name, so it resolves wherever shardgym is.
    assert ds.spec.env_spec.id == "shardgym/TPSim-v0"
    assert ds.spec.env_spec.kwargs["config"] == "quickstart"
    for eval_env in (False, True):
        env = ds.recover_environment(eval_env=eval_env)
        assert env.observation_space == ds.observation_space
        assert env.action_space == ds.action_space
    ep = next(ds.iterate_episodes())
    t = shardgym.datasets.load(trace).episodes[0]
    flat = np.concatenate([ep.observations[k].reshape(51, -1)
                           for k in ("blocks", "global", "links")], axis=1)
    np.testing.assert_array_equal(flat, t["observations"])
    np.testing.assert_array_equal(ep.actions, t["actions"])
    np.testing.assert_allclose(ep.rewards, t["rewards"])
    assert len(ep.infos["step_latency_s"]) == 51
    # Megatron keeps tp1d(t=8) from reset on; the recovered env replays the episode exactly,
    # the plan in force included.
    catalog = env.unwrapped.catalog
    assert (ep.observations["plan"] == catalog.index("tp1d(t=8)")).all()
    assert_episode_is_the_envs(env, ds, ep)


def test_normalised_scores_of_the_oracle_and_random_agents_are_1_and_0(tiny_traces,
                                                                      datasets_path):
    for agent, expected in (("oracle", 1.0), ("random", 0.0)):
        ds = shardgym.datasets.to_minari(tiny_traces[agent], f"shardgym/tiny-{agent}-v0",
                                         config=TINY)
        assert ds.total_episodes == 10
        returns = np.array([ep.rewards.sum() for ep in ds.iterate_episodes()])
        scores = minari.get_normalized_score(ds, returns)
        assert scores.mean() == pytest.approx(expected, abs=1e-9)
        meta = ds.storage.metadata
        assert meta["ref_max_score"] == pytest.approx(np.mean(
            [shardgym.run_agent("oracle", TINY, seed=s)["return"] for s in range(10)]))
    assert meta["ref_min_score"] < meta["ref_max_score"]


@pytest.mark.parametrize("how", ["pillow missing", "disk full"])
def test_a_failed_export_leaves_nothing_and_a_retry_succeeds(trace, datasets_path,
                                                              monkeypatch, how):
    from minari.dataset._storages import hdf5_storage
    with monkeypatch.context() as m:
        if how == "pillow missing":  # as in a venv without the extra: the storage's import fails
            m.setitem(sys.modules, "PIL", None)
            m.delitem(sys.modules, hdf5_storage.__name__)
            expected = ImportError
        else:                        # after the dataset's folder and file were made
            def full(*args, **kwargs):
                raise OSError("No space left on device")
            m.setattr(hdf5_storage.HDF5Storage, "update_episodes", full)
            expected = OSError
        with pytest.raises(expected, match="datasets.*extra|No space"):
            shardgym.datasets.to_minari(trace, "shardgym/quickstart-megatron-v0",
                                        config=QUICKSTART, reference_seeds=[0])
    assert not (datasets_path / "shardgym").exists()
    assert minari.list_local_datasets() == {}
    ds = shardgym.datasets.to_minari(trace, "shardgym/quickstart-megatron-v0",
                                     config=QUICKSTART, reference_seeds=[0])
    assert ds.total_steps == 50 and list(minari.list_local_datasets()) == [
        "shardgym/quickstart-megatron-v0"]


@pytest.mark.parametrize("bad", ["shardgym/quickstart-megatron", "quickstart", "shardgym/x-v",
                                 "shardgym//x-v0", "../x-v0", "shardgym/../x-v0", "/x-v0",
                                 "x y-v0", "x-v0/", "", "shardgym/x-v0.h5"])
def test_invalid_dataset_ids_are_refused_before_anything_is_written(trace, datasets_path, bad):
    with pytest.raises(ValueError, match="dataset id"):
        shardgym.datasets.to_minari(trace, bad, config=QUICKSTART)
    assert not datasets_path.exists() or not any(datasets_path.iterdir())


def test_valid_dataset_ids(datasets_path):
    check = shardgym.datasets.check_dataset_id
    assert check("x-v0") == (None, "x", 0)
    assert check("shardgym/quickstart-megatron-v12") == ("shardgym", "quickstart-megatron", 12)
    assert check("ns/sub/name_1-v3") == ("ns/sub", "name_1", 3)


def test_an_existing_dataset_is_kept(trace, datasets_path):
    shardgym.datasets.to_minari(trace, "shardgym/q-v0", config=QUICKSTART, reference_seeds=[0])
    with pytest.raises(FileExistsError, match="shardgym/q-v0"):
        shardgym.datasets.to_minari(trace, "shardgym/q-v0", config=QUICKSTART)
    assert minari.load_dataset("shardgym/q-v0").total_steps == 50


@pytest.mark.parametrize("change, message", [
    (lambda f: f["episodes/episode_0/observations"].__setitem__(
        (0, 480), 7.0), "first observation.*seed 0"),
    (lambda f: f["episodes/episode_0/actions"].__setitem__((3, 2), 999), "action space"),
    (lambda f: f["episodes/episode_0/plans"].__setitem__((3, 2), 10**6), "strategies table"),
    (lambda f: f["episodes/episode_0"].attrs.__setitem__("initial_plan", "47*dp"),
     "initial_plan.*47 entries"),
], ids=["first observation", "action", "plan id", "initial plan"])
def test_to_minari_refuses_a_trace_that_is_not_the_configs(trace, tmp_path, datasets_path,
                                                           change, message):
    copy = tmp_path / "t.h5"
    shutil.copy(trace, copy)
    with h5py.File(copy, "r+") as f:
        change(f)
    with pytest.raises(ValueError, match=message):
        shardgym.datasets.to_minari(str(copy), "shardgym/q-v0", config=QUICKSTART)
    assert not (datasets_path / "shardgym" / "q-v0").exists()


def test_to_minari_refuses_another_configs_trace(trace, datasets_path):
    with pytest.raises(ValueError, match="not the config it was recorded with"):
        shardgym.datasets.to_minari(trace, "shardgym/q-v0", config=TINY)


def test_plan_texts_split_per_block():
    split = shardgym.datasets._split_plan
    assert split("uniform:tp1d(t=8)@pp(p=2,m=4)", 4) == ["tp1d(t=8)"] * 4
    assert split("attn=dp|mlp=tp1d(t=2,sp=1)", 4) == ["dp", "tp1d(t=2,sp=1)"] * 2
    assert split("2*dp;tp1d(t=2);tp2d(d1=2,d2=4,first=row)", 4) == [
        "dp", "dp", "tp1d(t=2)", "tp2d(d1=2,d2=4,first=row)"]
    for bad in ("3*dp", "5*dp", "0*dp;4*dp", "dp;;dp;dp", "attn=dp", "9999999*dp", "uniform:",
                "x*dp;3*dp", "²*dp;3*dp", ""):
        with pytest.raises(ValueError):
            split(bad, 4)


def test_recorder_seeds_its_resets_from_the_first_seed(datasets_path):
    """Unseeded resets after reset(seed=s) get seeds drawn from s: the same on every run, a new
    one for each episode, and each episode replays from its recorded seed."""
    datasets = []
    for run in range(2):
        rec = shardgym.datasets.recorder(TINY)
        rec.action_space.seed(0)
        for episode in range(3):
            _, info = rec.reset(seed=5 if episode == 0 else None)
            for _ in range(7 + episode):  # episodes cut short: recorded as truncated
                _, _, _, _, info = rec.step(rec.action_space.sample(mask=info["action_mask"]))
        datasets.append(shardgym.datasets.create_dataset(rec, f"shardgym/random-{run}-v0",
                                                         algorithm_name="random masked"))
        rec.close()
    a, b = datasets
    seeds = [m["seed"] for m in a.storage.get_episode_metadata(range(3))]
    assert seeds == [m["seed"] for m in b.storage.get_episode_metadata(range(3))]
    assert seeds[0] == 5 and len(set(seeds)) == 3
    assert a.total_episodes == 3 and a.total_steps == 7 + 8 + 9
    env = a.recover_environment()
    assert env.observation_space == a.observation_space and env.action_space == a.action_space
    for ep in a.iterate_episodes():
        assert ep.truncations[-1] and not ep.truncations[:-1].any()
        assert_episode_is_the_envs(env, a, ep)


def test_create_dataset_joins_the_recorders_of_one_env(datasets_path):
    """One recorder per env of a vector env: one dataset. Recorders of other configs: refused."""
    def played(config, steps):
        rec = shardgym.datasets.recorder(config)
        _, info = rec.reset(seed=0)
        for _ in range(steps):
            _, _, _, _, info = rec.step(rec.action_space.sample(mask=info["action_mask"]))
        return rec
    with pytest.raises(ValueError, match="different envs"):
        shardgym.datasets.create_dataset([played(TINY, 1), played(QUICKSTART, 1)],
                                         "shardgym/mixed-v0", algorithm_name="random masked")
    assert not datasets_path.exists() or not any(datasets_path.iterdir())
    ds = shardgym.datasets.create_dataset([played(TINY, 5), played(TINY, 3)],
                                          "shardgym/joined-v0", algorithm_name="random masked")
    assert ds.total_episodes == 2 and ds.total_steps == 8
    assert minari.load_dataset("shardgym/joined-v0").total_steps == 8


def test_record_training_records_every_episode_the_learner_played(datasets_path):
    """examples/python/record_training.py, 200 steps of MaskablePPO on tiny.yaml (20-step
    episodes): every step and every episode the learner played is in the dataset."""
    pytest.importorskip("sb3_contrib")
    sys.path.insert(0, str(ROOT / "examples" / "python"))
    import record_training
    args = record_training.parse_args(["--config", TINY, "--steps", "200", "--n-steps", "64",
                                       "--batch-size", "64", "--epochs", "1",
                                       "--dataset-id", "shardgym/tiny-training-v0"])
    out = record_training.record(args)
    assert out["steps"] == 256  # whole rollouts of 64
    assert out["dataset_steps"] == out["steps"]
    assert out["dataset_episodes"] == out["episodes_played"] == 13  # 12 x 20 steps + 16
    ds = minari.load_dataset("shardgym/tiny-training-v0")
    assert [len(ep.rewards) for ep in ds.iterate_episodes()] == [20] * 12 + [16]
    assert np.isfinite(out["first_score"]) and out["ref_min_score"] < out["ref_max_score"]
    env = ds.recover_environment()
    assert env.observation_space == ds.observation_space  # the full Dict, not the filtered
    assert_episode_is_the_envs(env, ds, next(ds.iterate_episodes()))
