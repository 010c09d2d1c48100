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
