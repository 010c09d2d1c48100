"""`shardgym report` / python -m shardgym.report on traces recorded by this build's CLI."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import QUICKSTART, cli

pytest.importorskip("rliable")
from shardgym import report  # noqa: E402

SEEDS = "0,1"
AGENTS = "megatron,greedy,random"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A `compare --out` folder (3 agents x 2 seeds) and two `train` runs (2 seeds), 12 steps."""
    exe = cli()
    if exe is None:
        pytest.skip("no shardgym CLI to record traces (set SHARDGYM_BINARY_DIR to a build)")
    root = tmp_path_factory.mktemp("runs")
    subprocess.run([exe, "compare", QUICKSTART, "--agents", AGENTS, "--seeds", SEEDS,
                    "--steps", "12", "--no-references", "--out", str(root / "cmp")],
                   check=True, capture_output=True)
    config = QUICKSTART
    for seed in (0, 1):
        args = ["--train-steps", "0", "--episodes", "3", "--steps", "12", "--seed", str(seed),
                "--out", str(root / f"train{seed}")]
        proc = subprocess.run([exe, "train", config] + args, capture_output=True, text=True)
        if proc.returncode != 0 and "LibTorch" in proc.stderr and config == QUICKSTART:
            # A build without LibTorch has no PPO: the quickstart with a greedy agent instead.
            config = str(root / "quickstart-greedy.yaml")
            text = open(QUICKSTART).read().replace(
                "include: hardware.yaml",
                "include: " + str(Path(QUICKSTART).parent / "hardware.yaml"))
            text = re.sub(r"agent:\n(  .*\n)+", "agent:\n  id: greedy\n", text)
            Path(config).write_text(text)
            proc = subprocess.run([exe, "train", config] + args, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    return exe, root


@pytest.fixture(scope="module")
def built(runs, tmp_path_factory):
    exe, root = runs
    out = tmp_path_factory.mktemp("report")
    # Through the C++ subcommand: the build's Python, PYTHONPATH and SHARDGYM_CLI set by it.
    proc = subprocess.run([exe, "report", str(root / "cmp"), str(root / "train0"),
                           str(root / "train1"), "--out", str(out), "--bootstrap-reps", "500"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


def _png(path):
    import matplotlib.image
    return matplotlib.image.imread(str(path))


def test_index_and_every_figure_exist_and_show_something(built):
    page = (built / "index.html").read_text()
    pngs = re.findall(r'<img src="([^"]+\.png)"', page)
    # Learning curves, plans, time series, Pareto: one each for the quickstart experiment.
    assert len(pngs) == 4 and any("learning" in p for p in pngs)
    assert sorted(pngs) == sorted(p.name for p in built.glob("*.png"))
    for name in pngs:
        path = built / name
        assert path.stat().st_size > 10_000, name
        img = _png(path)
        assert img.shape[0] >= 300 and img.shape[1] >= 500, (name, img.shape)
        assert len(np.unique(img.reshape(-1, img.shape[-1]), axis=0)) > 50, name  # not blank
    assert page.count("<figcaption>") == len(pngs)
    assert "<table>" in page and "Problems" not in page


def test_table_means_equal_compare_from_traces(runs, built):
    exe, root = runs
    tables = json.loads((built / "table.json").read_text())
    table = tables[str(root / "cmp")]
    assert [r["agent"] for r in table["rows"]] == ["greedy", "megatron", "random"]
    assert table["seeds"] == [0, 1]
    for statistic, key in (("mean", "mean"), ("iqm", "iqm")):  # 2 seeds: both IQMs = the mean
        proc = subprocess.run([exe, "compare", "--from-traces", str(root / "cmp"),
                               "--statistic", statistic], check=True, capture_output=True,
                              text=True)
        cxx = {}
        for line in proc.stdout.splitlines():
            m = re.match(r"^(\S+)\s+(\d+)\s+([\d.]+) \[.*?\]\s+([\d.]+) \[.*?\]\s+([\d.]+) \[", line)
            if m:
                cxx[m.group(1)] = [float(m.group(i)) for i in (3, 4, 5)]
        assert sorted(cxx) == ["greedy", "megatron", "random"]
        for r in table["rows"]:
            mine = [r[metric][key] for metric in ("throughput", "memory", "energy")]
            # The C++ table prints 2 decimals: the same numbers, rounded.
            assert [float(f"{v:.2f}") for v in mine] == cxx[r["agent"]], (statistic, r["agent"])
    # The random agent is slower than Megatron-LM on the quickstart (a check that the ratios
    # are the agents' own, not a copy of the baseline's).
    rows = {r["agent"]: r for r in table["rows"]}
    assert rows["megatron"]["throughput"]["mean"] == 1.0
    assert rows["random"]["throughput"]["mean"] < 0.9


def test_summarize_matches_the_trace(runs):
    _, root = runs
    from shardgym import datasets
    ep = datasets.load(str(root / "cmp" / "megatron.h5")).episodes[0]
    s = report.summarize(ep)
    m = ep["metrics"]
    assert s["throughput"] == pytest.approx(
        m["tokens"].sum() / (m["step_latency_s"] + m["repartition_s"]).sum(), rel=1e-12)
    assert s["failed_steps"] == 0 and s["steps"] == 12


def test_pareto_front():
    pts = [(1.0, 5.0), (2.0, 2.0), (3.0, 3.0), (0.5, 9.0), (2.0, 2.0)]
    assert report.pareto_front(pts) == [3, 0, 1, 4]  # (3, 3) is beaten by (2, 2)


def test_scenario_events_from_config_text():
    text = ("name: x\nscenario:\n  events:\n    - {step: 50, kind: straggler, rank: 3, "
            "factor: 1.5}\n    - {step: 10, kind: seq_length, value: 256}\n")
    assert report.scenario_events(text) == [(10, "seq_length = 256"),
                                            (50, "rank 3 compute x1.5")]
    assert report.scenario_events("name: static\n") == []


def test_folder_without_traces_is_refused(runs, tmp_path):
    exe, _ = runs
    (tmp_path / "empty").mkdir()
    proc = subprocess.run([exe, "report", str(tmp_path / "empty"), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "no trace (*.h5)" in proc.stderr and str(tmp_path / "empty") in proc.stderr


def test_damaged_trace_is_named_and_refused_before_h5py(runs, tmp_path):
    exe, root = runs
    run = tmp_path / "run"
    shutil.copytree(root / "cmp", run)
    data = bytearray((run / "greedy.h5").read_bytes())
    data[:] = data[: len(data) // 3]  # cut short: the superblock points past the end
    (run / "greedy.h5").write_bytes(bytes(data))
    proc = subprocess.run([exe, "report", str(run), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "greedy.h5: damaged or not a trace" in proc.stderr
    # --skip-damaged: the report is made without it, and says so.
    proc = subprocess.run([exe, "report", str(run), "--out", str(tmp_path / "out"),
                           "--skip-damaged"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "out" / "index.html").read_text()
    assert "greedy.h5: damaged or not a trace" in page
    table = json.loads((tmp_path / "out" / "table.json").read_text())[str(run)]
    assert [r["agent"] for r in table["rows"]] == ["megatron", "random"]


@pytest.mark.parametrize("value", [0.0, float("nan"), -1.0, float("inf")])
def test_impossible_figures_are_named_and_skipped(runs, tmp_path, value):
    """A latency of 0, NaN, -1 or inf on a step that did not fail passes `inspect` (the file is
    a well-formed trace); report names the trace and refuses it, or leaves it out under
    --skip-damaged, without a traceback. The plan ids likewise."""
    import h5py
    exe, root = runs
    run = tmp_path / "run"
    shutil.copytree(root / "cmp", run)
    with h5py.File(run / "greedy.h5", "r+") as f:
        f["episodes/episode_0/metrics/step_latency_s"][3] = value
    assert subprocess.run([exe, "inspect", str(run / "greedy.h5")],
                          capture_output=True).returncode == 0
    proc = subprocess.run([exe, "report", str(run), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "greedy.h5: episode_0: metrics/step_latency_s is impossible" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = subprocess.run([exe, "report", str(run), "--out", str(tmp_path / "out"),
                           "--skip-damaged"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    table = json.loads((tmp_path / "out" / "table.json").read_text())[str(run)]
    assert [r["agent"] for r in table["rows"]] == ["megatron", "random"]


def test_plan_id_outside_the_strategy_table_is_named(runs, tmp_path):
    import h5py
    exe, root = runs
    run = tmp_path / "run"
    shutil.copytree(root / "cmp", run)
    with h5py.File(run / "random.h5", "r+") as f:
        f["episodes/episode_0/plans"][0, 0] = 10**6
    proc = subprocess.run([exe, "report", str(run), "--out", str(tmp_path / "out"),
                           "--skip-damaged"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # `inspect` (which report runs first) names it now; report's own check stays behind it.
    assert "random.h5" in proc.stderr and "Traceback" not in proc.stderr
    assert ("plan id 1000000, outside the trace's" in proc.stderr
            or "episode_0: plans" in proc.stderr), proc.stderr


def test_incomplete_episode_is_reported_and_skipped(runs, tmp_path):
    import h5py
    _, root = runs
    run = tmp_path / "run"
    shutil.copytree(root / "train0", run)
    with h5py.File(run / "trace.h5", "r+") as f:
        f["episodes/episode_2"].attrs["complete"] = 0  # as a run killed during episode 2
    r = report.build_report([str(run)], tmp_path / "out", cli=cli(), reps=100)
    assert any("episode_2 is incomplete" in p for p in r["problems"])
    assert "episode_2 is incomplete" in (tmp_path / "out" / "index.html").read_text()


def test_fidelity_pairs_live_and_sim_episodes_with_the_same_plans(tmp_path):
    """The figure code on two hand-made traces (no live build needed): the sim episode with the
    live one's plans and seed is paired, one with other plans is not."""
    plans = np.zeros((4, 2), dtype=np.int32)

    def ep(backend, plans, latency):
        n = len(plans)
        return {"attrs": {"backend": backend, "seed": 0, "agent": "megatron"}, "name": "e",
                "plans": plans, "rewards": np.ones(n),
                "metrics": {"step_latency_s": np.full(n, latency),
                            "peak_memory_bytes": np.full((n, 2), 2.0 ** 22)}}

    class T:
        def __init__(self, name, episodes):
            self.path, self.episodes = tmp_path / name, episodes

    png, desc = report.fidelity([T("live.h5", [ep("live", plans, 0.2)]),
                                 T("sim.h5", [ep("sim", plans + 1, 0.02), ep("sim", plans, 0.02)])],
                                tmp_path, "fidelity.png")
    assert png == "fidelity.png" and (tmp_path / png).stat().st_size > 10_000
    assert desc.startswith("median simulator / live step latency 0.1;")
    assert report.fidelity([T("sim.h5", [ep("sim", plans, 0.02)])], tmp_path, "x.png") == \
        (None, None)
