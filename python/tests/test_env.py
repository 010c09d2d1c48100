import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import shardgym
import shardgym.vector
from conftest import ROOT

SIM = "shardgym/TPSim-v0"


def make(quickstart, **options):
    return gymnasium.make(SIM, config=quickstart, **options)


def test_every_registered_env_is_a_gymnasium_env(quickstart, request):
    ids = shardgym.env_ids()
    assert {SIM, "shardgym/TPReplay-v0"} <= set(ids)
    for env_id in ids:
        flags = shardgym.env.env_flags(env_id)  # what each env needs, from its registration
        if flags["real_run"]:  # the live env, LibTorch builds only
            env = gymnasium.make(env_id, config=str(ROOT / "experiments" / "live-quickstart.yaml"),
                                 steps_per_episode=2)
        elif flags["needs_trace"]:
            try:
                trace = request.getfixturevalue("trace")
            except pytest.skip.Exception:  # no CLI to record one: the other envs still run
                continue
            env = gymnasium.make(env_id, config=quickstart, trace=trace)
        else:
            env = gymnasium.make(env_id, config=quickstart)
        obs, info = env.reset(seed=0)
        assert obs in env.observation_space
        obs, reward, terminated, truncated, info = env.step(obs["plan"])  # keep the plan
        assert obs in env.observation_space and np.isfinite(reward)
        assert not truncated, info.get("error")
        env.close()


def test_check_env_passes(quickstart):
    check_env(make(quickstart).unwrapped, skip_render_check=True)


def test_unknown_option_names_the_allowed_ones(quickstart):
    with pytest.raises(TypeError, match=r"unknown option\(s\) stepz; allowed: config, "):
        make(quickstart, stepz=3)
    with pytest.raises(TypeError, match="config=PATH is required"):
        gymnasium.make(SIM)
    with pytest.raises(ValueError, match="steps_per_episode"):
        make(quickstart, steps_per_episode=0)
    with pytest.raises(ValueError, match="quickstart-missing.yaml: cannot read"):  # C++ loader
        gymnasium.make(SIM, config=quickstart.replace("quickstart", "quickstart-missing"))


def test_options_and_flags_come_from_the_registration(quickstart):
    from shardgym.env import env_flags, env_options
    sim = env_options(SIM)
    assert list(sim) == ["steps_per_episode", "initial_plan", "normalize_reward"]
    assert sim["steps_per_episode"]["type"] == "int" and sim["steps_per_episode"]["default"] == 100
    assert sim["normalize_reward"]["config_key"] == "reward.normalize"
    assert sim["normalize_reward"]["default"] is True
    replay = env_options("shardgym/TPReplay-v0")
    assert replay["trace"]["type"] == "path" and replay["trace"]["config_key"] == "replay_trace"
    assert env_flags(SIM) == {"deterministic": True, "platform_dependent": False,
                              "needs_libtorch": False, "needs_trace": False, "real_run": False}
    assert env_flags("shardgym/TPReplay-v0")["needs_trace"]
    assert set(shardgym.OPTIONS) == {"config", "masked_action", *sim}

    # Only what the env declares: the simulator takes no trace.
    with pytest.raises(TypeError, match=r"unknown option\(s\) trace; allowed: config, "
                                        r"initial_plan, masked_action, normalize_reward, "
                                        r"steps_per_episode was"):
        make(quickstart, trace="x.h5")
    with pytest.raises(TypeError, match="option normalize_reward takes a bool"):
        make(quickstart, normalize_reward=1)
    with pytest.raises(ValueError, match="replay_trace: missing required key"):
        gymnasium.make("shardgym/TPReplay-v0", config=quickstart)
    with pytest.raises(ValueError, match="replay_trace: no file at '/no/such.h5'"):
        gymnasium.make("shardgym/TPReplay-v0", config=quickstart, trace="/no/such.h5")
    env = make(quickstart, normalize_reward=False, steps_per_episode=np.int64(3))
    assert env.unwrapped.experiment.steps_per_episode == 3
    assert not env.unwrapped.experiment.normalize_reward

    if "shardgym/TPLive-v0" in shardgym.env_ids():  # LibTorch builds only
        live = env_options("shardgym/TPLive-v0")
        assert live["lr"]["default"] == 1e-3 and live["lr"]["config_key"] == "live.extra.lr"
        assert env_flags("shardgym/TPLive-v0")["real_run"]
        config = ROOT / "experiments" / "live-quickstart.yaml"
        with pytest.raises(ValueError, match="live.extra.lr: must be between 0 and"):
            shardgym.load_experiment(config, lr=-1.0)
        with pytest.raises(ValueError, match="live.extra.fault: 'exit' cannot be undone"):
            shardgym.load_experiment(config, fault="exit@1:1")


def test_spaces_and_named_parts(quickstart):
    env = make(quickstart)
    u = env.unwrapped
    b, k = u.num_blocks, len(u.catalog)
    assert env.observation_space["blocks"].shape == (b, 10)
    assert env.observation_space["blocks"].dtype == np.float32
    assert set(env.observation_space.spaces) == {"blocks", "global", "links", "plan"}
    assert list(env.action_space.nvec) == [k] * b
    obs, info = env.reset(seed=0)
    # The plan is C++'s ints, and agrees with the float feature that encodes it.
    np.testing.assert_array_equal(obs["plan"], info["plan_indices"])
    np.testing.assert_allclose(obs["blocks"][:, 0], obs["plan"] / k, rtol=1e-6)
    assert info["plan"] == "uniform:" + u.catalog[obs["plan"][0]]


def test_info_reports_the_repartition(quickstart):
    env = make(quickstart)
    obs, info = env.reset(seed=0)
    keep = obs["plan"].copy()
    _, _, _, _, info = env.step(keep)
    assert info["repartition_bytes"] == 0 and info["repartition_peak_bytes"] == 0
    # Block 0 to other strategies its mask allows, until one lacks pieces the old one held:
    # that move receives bytes and holds its new state and messages in transit.
    k = len(env.unwrapped.catalog)
    found = False
    for a in range(k):
        if a == keep[0] or not info["action_mask"][a]:
            continue
        moved = keep.copy()
        moved[0] = a
        _, _, _, _, info = env.step(moved)
        if info["repartition_bytes"] > 0:
            assert info["repartition_peak_bytes"] > 0
            found = True
            break
        _, _, _, _, info = env.step(keep)
    assert found


def test_masks_follow_maskable_ppo_convention(quickstart):
    env = make(quickstart)
    obs, info = env.reset(seed=0)
    mask = info["action_mask"]
    assert mask.dtype == np.bool_ and mask.shape == (int(env.action_space.nvec.sum()),)
    np.testing.assert_array_equal(mask, env.unwrapped.action_masks())
    rng = np.random.default_rng(0)
    for _ in range(5):
        action = env.action_space.sample(mask=shardgym.split_mask(mask, env.action_space.nvec))
        obs, reward, terminated, truncated, info = env.step(action)
        assert not truncated, info.get("error")
        mask = info["action_mask"]
    # A masked choice: the episode ends (default), or ValueError with masked_action="raise".
    masked = np.flatnonzero(~mask[: len(env.unwrapped.catalog)])
    if masked.size == 0:
        pytest.skip("block 0 has no masked choice on this config")
    action = obs["plan"].copy()
    action[0] = masked[0]
    _, reward, terminated, truncated, info = env.step(action)
    assert truncated and reward == 0.0 and "block 0" in info["error"]
    strict = make(quickstart, masked_action="raise")
    strict.reset(seed=0)
    with pytest.raises(ValueError, match="block 0"):
        strict.step(action)


def test_non_integer_and_out_of_range_actions_are_refused(quickstart):
    """NaN, inf, 2.5 and 2**32 + 3 used to become valid choices on the cast to int32 (NaN and
    inf to 0 through int64, 2**32 + 3 to 3); the single env and the vector env now both raise
    ValueError naming the entry."""
    env = make(quickstart)
    obs, _ = env.reset(seed=0)
    venv = shardgym.vector.make(SIM, num_envs=2, config=quickstart, threads=1)
    vobs, _ = venv.reset(seed=0)
    for bad in (np.nan, np.inf, -np.inf, 2.5, 2**32 + 3, -1, 2**63 - 1):
        action = obs["plan"].astype(np.float64 if isinstance(bad, float) else np.int64)
        action[0] = bad
        with pytest.raises(ValueError, match="entry"):
            env.step(action)
        actions = vobs["plan"].astype(action.dtype)
        actions[1, 0] = bad
        with pytest.raises(ValueError, match="entry"):
            venv.step(actions)
    # Whole floats are still actions (as before).
    env.step(obs["plan"].astype(np.float64))


def test_seeding_and_time_limit(quickstart):
    env = make(quickstart, steps_per_episode=3)
    def first_step(seed):
        obs, _ = env.reset(seed=seed)
        return env.step(obs["plan"])

    a, b, c = first_step(5), first_step(5), first_step(6)
    for name in a[0]:
        np.testing.assert_array_equal(a[0][name], b[0][name])
    assert a[1] == b[1] and a[1] != c[1], "the simulator's noise follows the seed"
    a, _ = env.reset(seed=5)
    ends = [env.step(a["plan"])[2:4] for _ in range(3)]
    assert ends == [(False, False), (False, False), (False, True)]


def test_run_agent_oracle_beats_megatron(quickstart):
    oracle = shardgym.run_agent("oracle", quickstart, seed=0)
    megatron = shardgym.run_agent("megatron", quickstart, seed=0)
    assert oracle["steps"] == megatron["steps"] == 50
    assert megatron["return"] == pytest.approx(50.0, rel=0.01), "1.0 per step = Megatron"
    assert oracle["return"] > 1.3 * megatron["return"]
    with pytest.raises(ValueError, match="unknown agent"):
        shardgym.run_agent("orakel", quickstart)


def test_pipeline_component(quickstart):
    config = str(ROOT / "experiments" / "pipeline-quickstart.yaml")
    env = gymnasium.make(SIM, config=config)
    b = env.unwrapped.num_blocks
    assert env.observation_space["pipeline"].shape == (3,)  # p = 2: 1 boundary + 2 stages
    assert list(env.action_space.nvec) == [len(env.unwrapped.catalog)] * b + [3]
    obs, info = env.reset(seed=0)
    assert info["action_mask"].shape == (int(env.action_space.nvec.sum()),)
    assert info["action_mask"][-3], "choice 0 of the pipeline component (keep) is allowed"
    check_env(env.unwrapped, skip_render_check=True)
