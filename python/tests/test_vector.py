import gymnasium
import numpy as np
import pytest

import shardgym
import shardgym.vector

SIM = "shardgym/TPSim-v0"


def test_vector_env_matches_single_envs(quickstart):
    n, steps, seed = 3, 7, 11
    venv = shardgym.vector.make(SIM, num_envs=n, config=quickstart, steps_per_episode=4)
    singles = [gymnasium.make(SIM, config=quickstart, steps_per_episode=4) for _ in range(n)]
    obs, info = venv.reset(seed=seed)
    single = [e.reset(seed=seed + i) for i, e in enumerate(singles)]
    rng = np.random.default_rng(0)
    nvec = singles[0].action_space.nvec
    for t in range(steps):
        for i, (o, inf) in enumerate(single):
            for name in o:
                np.testing.assert_array_equal(obs[name][i], o[name], err_msg=f"{name} env {i}")
            np.testing.assert_array_equal(info["action_mask_flat"][i], inf["action_mask_flat"])
        actions = np.stack([singles[0].action_space.sample(
            mask=shardgym.split_mask(info["action_mask_flat"][i], nvec)) for i in range(n)])
        obs, rewards, terminated, truncated, info = venv.step(actions)
        for i, e in enumerate(singles):
            o, r, te, tr, inf = e.step(actions[i])
            assert rewards[i] == r and terminated[i] == te and truncated[i] == tr
            assert info["_final_obs"][i] == (te or tr) if "final_obs" in info else not (te or tr)
            if te or tr:  # same-step autoreset: the vector env's final obs, then the next episode
                assert info["_final_info"][i] and info["final_info"]["error"][i] == inf["error"]
                np.testing.assert_array_equal(info["final_obs"]["blocks"][i], o["blocks"])
                np.testing.assert_array_equal(info["final_obs"]["plan"][i], o["plan"])
                o, inf = e.reset()
            single[i] = (o, inf)
    assert info is not None


def test_vector_env_keeps_the_entry_in_force_for_a_masked_one(quickstart):
    """As the single env: the masked entry is refused (info["refused"]), the rest applied."""
    venv = shardgym.vector.make(SIM, num_envs=2, config=quickstart)
    single = gymnasium.make(SIM, config=quickstart)
    obs, info = venv.reset(seed=0)
    single.reset(seed=1)
    k = venv.catalog_size
    masked = np.flatnonzero(~info["action_mask_flat"][1][:k])
    assert masked.size, "quickstart: block 0 has masked choices"
    actions = obs["plan"].copy()
    actions[1, 0] = masked[0]
    obs2, rewards, terminated, truncated, info = venv.step(actions)
    assert not (terminated.any() or truncated.any())
    assert info["refused"][1].tolist() == [True] + [False] * (actions.shape[1] - 1)
    assert not info["refused"][0].any() and info["_refused"].all()
    np.testing.assert_array_equal(obs2["plan"], obs["plan"])
    s_obs, s_reward, *_, s_info = single.step(actions[1])  # env 1 = seed 0 + 1
    assert s_reward == rewards[1] and s_info["refused"].tolist() == info["refused"][1].tolist()


def test_vector_env_is_a_gymnasium_vector_env(quickstart):
    """Gymnasium's VectorEnv API: metadata, reset(seed=None, options=None), the info
    conventions of same-step autoreset, its vector wrappers and make_vec."""
    from gymnasium.vector import AutoresetMode
    venv = shardgym.vector.make(SIM, num_envs=3, config=quickstart, steps_per_episode=2)
    assert isinstance(venv, gymnasium.vector.VectorEnv)
    assert venv.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    keep = venv.reset(seed=0)[0]["plan"]

    def first_rewards(**reset):
        venv.reset(**reset)
        return venv.step(keep)[1]

    a, b = first_rewards(), first_rewards()
    assert not np.array_equal(a, b), "two unseeded resets give two different episodes"
    np.testing.assert_array_equal(first_rewards(seed=4), first_rewards(seed=4, options=None))
    with pytest.raises(ValueError, match="no options"):
        venv.reset(options={"x": 1})

    # Each wrapper on its own: gymnasium 1.1's DictInfoToList cannot read the "episode" dict
    # its own RecordEpisodeStatistics writes (no "_r"), whatever the env.
    stats = gymnasium.wrappers.vector.RecordEpisodeStatistics(venv)
    listed = gymnasium.wrappers.vector.DictInfoToList(venv)
    for wrapped in (stats, listed):
        wrapped.reset(seed=0)
        wrapped.action_space.seed(0)
        infos = [wrapped.step(wrapped.action_space.sample())[4] for _ in range(2)]
        if wrapped is stats:
            assert "episode" not in infos[0] and infos[1]["_episode"].all()
            assert infos[1]["episode"]["l"].tolist() == [2, 2, 2]
            assert len(stats.return_queue) == 3
        else:
            assert isinstance(infos[1], list) and len(infos[1]) == 3
            assert all("final_obs" in i and "refused" in i for i in infos[1])
            assert "final_obs" not in infos[0][0]

    made = gymnasium.make_vec(SIM, num_envs=2, vectorization_mode="vector_entry_point",
                              config=quickstart)
    assert isinstance(made.unwrapped, shardgym.vector.VectorEnv) and made.num_envs == 2
    made.close()
    venv.close()
    assert venv.closed
    with pytest.raises(gymnasium.error.ClosedEnvironmentError):
        venv.step(keep)


def test_vector_env_has_gymnasiums_space_attributes(quickstart):
    """single_observation_space / single_action_space are the single env's; observation_space
    and action_space carry the leading N axis, and what reset and step return lies in them."""
    single = gymnasium.make(SIM, config=quickstart)
    venv = shardgym.vector.make(SIM, num_envs=3, config=quickstart, threads=1)
    assert venv.single_observation_space == single.observation_space
    assert venv.single_action_space == single.action_space
    assert venv.action_space.shape == (3,) + single.action_space.shape
    obs, info = venv.reset(seed=0)
    assert venv.observation_space.contains(obs)
    nvec = venv.single_action_space.nvec
    actions = np.stack([venv.single_action_space.sample(
        mask=shardgym.split_mask(info["action_mask_flat"][i], nvec)) for i in range(3)])
    assert venv.action_space.contains(actions)
    obs, *_ = venv.step(actions)
    assert venv.observation_space.contains(obs)
    single.close()
    venv.close()
