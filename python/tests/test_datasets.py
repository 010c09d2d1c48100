import numpy as np
import pytest

import shardgym
import shardgym.datasets


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


def test_to_minari_opens_with_minari(trace, tmp_path, monkeypatch, quickstart):
    minari = pytest.importorskip("minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    shardgym.datasets.to_minari(trace, "shardgym/quickstart-megatron-v0", config=quickstart)
    ds = minari.load_dataset("shardgym/quickstart-megatron-v0")
    assert ds.total_episodes == 1 and ds.total_steps == 50
    ep = next(ds.iterate_episodes())
    t = shardgym.datasets.load(trace).episodes[0]
    np.testing.assert_array_equal(ep.observations, t["observations"])
    np.testing.assert_array_equal(ep.actions, t["actions"])
    np.testing.assert_allclose(ep.rewards, t["rewards"])


@pytest.mark.parametrize("kind", ["external_link", "external_storage", "virtual"])
def test_load_refuses_data_outside_the_trace(trace, tmp_path, kind):
    """episode_0/rewards replaced by data from outside the file, holding the same values:
    refused by name before it is read (the C++ reader refuses it too, datasets/h5_util.h)."""
    import shutil
    import h5py
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
