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
            np.testing.assert_array_equal(info["action_mask"][i], inf["action_mask"])
        actions = np.stack([singles[0].action_space.sample(
            mask=shardgym.split_mask(info["action_mask"][i], nvec)) for i in range(n)])
        obs, rewards, terminated, truncated, info = venv.step(actions)
        for i, e in enumerate(singles):
            o, r, te, tr, inf = e.step(actions[i])
            assert rewards[i] == r and terminated[i] == te and truncated[i] == tr
            if te or tr:  # autoreset: the vector env's final obs, then the next episode
                np.testing.assert_array_equal(info["final_obs"]["blocks"][i], o["blocks"])
                np.testing.assert_array_equal(info["final_obs"]["plan"][i], o["plan"])
                o, inf = e.reset()
            single[i] = (o, inf)
    assert info is not None


def test_vector_env_raises_on_a_masked_action(quickstart):
    venv = shardgym.vector.make(SIM, num_envs=2, config=quickstart)
    obs, info = venv.reset(seed=0)
    k = venv.catalog_size
    masked = np.flatnonzero(~info["action_mask"][1][:k])
    if masked.size == 0:
        return
    actions = obs["plan"].copy()
    actions[1, 0] = masked[0]
    with pytest.raises(ValueError, match="block 0|attn"):
        venv.step(actions)


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
        mask=shardgym.split_mask(info["action_mask"][i], nvec)) for i in range(3)])
    assert venv.action_space.contains(actions)
    obs, *_ = venv.step(actions)
    assert venv.observation_space.contains(obs)
    single.close()
    venv.close()
