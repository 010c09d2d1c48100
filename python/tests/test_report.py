"""`shardgym report` / python -m shardgym.report on traces recorded by this build's CLI (a
`compare --out` folder, two short `train --out` runs) and a hand-made suite JSON; the page
rendered by a headless Chromium where one is installed."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import report_fixtures
from conftest import QUICKSTART, cli, cli_or_skip

pytest.importorskip("rliable")
from shardgym import report  # noqa: E402
from shardgym import report_style as style  # noqa: E402

SEEDS = "0,1,2,3,4"  # 5 runs: rliable's IQM (trims 1 of each end) differs from the mean
AGENTS = "megatron,greedy,random"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A `compare --out` folder (3 agents x 5 seeds) and two `train` runs (2 seeds) of 2,048
    env steps of PPO training each (learning.csv), 12-step episodes."""
    exe = cli_or_skip(" to record traces")
    root = tmp_path_factory.mktemp("runs")
    subprocess.run([exe, "compare", QUICKSTART, "--agents", AGENTS, "--seeds", SEEDS,
                    "--steps", "12", "--no-references", "--out", str(root / "cmp")],
                   check=True, capture_output=True)
    config = QUICKSTART
    for seed in (0, 1):
        args = ["--train-steps", "2048", "--episodes", "2", "--steps", "12", "--seed",
                str(seed), "--out", str(root / f"train{seed}")]
        proc = subprocess.run([exe, "train", config] + args, capture_output=True, text=True)
        if proc.returncode != 0 and "LibTorch" in proc.stderr and config == QUICKSTART:
            # A build without LibTorch has no PPO: the quickstart with a greedy agent instead
            # (nothing to train: no learning.csv, which the page then reports).
            config = str(root / "quickstart-greedy.yaml")
            text = open(QUICKSTART).read().replace(
                "include: hardware.yaml",
                "include: " + str(Path(QUICKSTART).parent / "hardware.yaml"))
            text = re.sub(r"agent:\n(  .*\n)+", "agent:\n  id: greedy\n", text)
            Path(config).write_text(text)
        if config != QUICKSTART:
            args[1] = "0"
            proc = subprocess.run([exe, "train", config] + args, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    report_fixtures.suite_json(root / "suite.json")
    return exe, root


@pytest.fixture(scope="module")
def built(runs, tmp_path_factory):
    exe, root = runs
    out = tmp_path_factory.mktemp("report")
    # Through the C++ subcommand: the build's Python, PYTHONPATH and SHARDGYM_CLI set by it.
    proc = subprocess.run([exe, "report", str(root / "cmp"), str(root / "train0"),
                           str(root / "train1"), str(root / "suite.json"), "--out", str(out),
                           "--bootstrap-reps", "300"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


def _trained(root):
    return (root / "train0" / "learning.csv").exists()


def test_every_figure_in_png_pdf_and_svg(runs, built):
    from PIL import Image
    _, root = runs
    page = (built / "index.html").read_text()
    stems = re.findall(r'<img src="([^"]+)\.png"', page)
    exp = next(s for s in stems if s.endswith("-plans"))[:-len("-plans")]  # the quickstart
    assert sorted(stems) == sorted(
        [f"{exp}-{k}" for k in ["plans", "timeseries", "pareto"] +
         (["learning"] if _trained(root) else [])] +
        ["suite-synthetic", "suite-synthetic-profiles", "suite-synthetic-improvement"])
    assert sorted(stems) == sorted(p.stem for p in built.glob("*.png"))
    for stem in stems:
        img = Image.open(built / f"{stem}.png")
        assert img.info["dpi"][0] >= 199.5, (stem, img.info.get("dpi"))  # 200 dpi
        assert img.size[0] >= 1000 and img.size[1] >= 400, (stem, img.size)
        pixels = np.asarray(img.convert("RGB")).reshape(-1, 3)
        assert len(np.unique(pixels[::7], axis=0)) > 50, stem  # not blank
        assert (built / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
        assert "<svg" in (built / f"{stem}.svg").read_text()[:1000]
        for ext in ("pdf", "svg"):
            assert f'href="{stem}.{ext}"' in page, (stem, ext)
    assert page.count("<figcaption>") == len(stems)
    assert "<table>" in page and "Problems" not in page


def test_contents_link_every_section(built):
    page = (built / "index.html").read_text()
    nav = re.search(r'<nav class="toc">(.*?)</nav>', page, re.S).group(1)
    ids = set(re.findall(r' id="([^"]+)"', page))
    targets = re.findall(r'href="#([^"]+)"', page)
    assert targets and set(targets) <= ids  # every link lands
    headings = re.findall(r'<h[23] id="([^"]+)"', page)
    assert len(headings) >= 8 and set(headings) <= set(re.findall(r'href="#([^"]+)"', nav))


def test_an_agent_has_one_colour_in_every_figure(runs, built):
    _, root = runs
    page = (built / "index.html").read_text()
    svgs = {k: next(built.glob(f"*-{k}.svg")).read_text().lower()
            for k in ("pareto", "timeseries")}
    for agent in AGENTS.split(","):
        c = style.colour(agent).lower()
        assert all(c in svg for svg in svgs.values()), agent
        assert f'<span class="swatch" style="background:{style.colour(agent)}"' in page
    suite = (built / "suite-synthetic-profiles.svg").read_text().lower()
    for agent in ("megatron", "replan", "hindsight-static", "ppo(polish=0)"):
        assert style.colour(agent).lower() in suite, agent
    if _trained(root):
        from shardgym import datasets
        learner = report._agent_of(datasets.load(str(root / "train0" / "trace.h5")))
        c = style.colour(learner).lower()
        assert c in next(built.glob("*-learning.svg")).read_text().lower()
        assert c in svgs["pareto"]


def test_colours_are_fixed_across_processes():
    """A table for the registered agents; variants and new names hash (not Python's salted
    hash()) into colours: the same in another process."""
    assert style.colour("megatron") == "#8c8c8c" and style.colour("replan") == "#0072B2"
    names = ["ppo(polish=0)", "brand-new-agent", "replan(window=4)"]
    code = ("from shardgym import report_style as s; "
            f"print([s.colour(a) + s.marker(a) for a in {names!r}])")
    outs = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outs.add(subprocess.run([os.sys.executable, "-c", code], env=env, check=True,
                                capture_output=True, text=True).stdout)
    assert len(outs) == 1
    assert style.colour("ppo(polish=0)") != style.colour("ppo")
    assert style.colour("brand-new-agent") in style.FALLBACK_COLOURS
    assert not set(style.FALLBACK_COLOURS) & set(style.AGENT_COLOURS.values())


def test_table_means_and_iqms_equal_compare_from_traces(runs, built):
    """The page's mean and IQM are those `compare --from-traces` prints: rliable's IQM
    (trim_mean 0.25) on both sides, told apart from the mean with 5 seeds."""
    from rliable import metrics
    exe, root = runs
    tables = json.loads((built / "table.json").read_text())
    table = tables[str(root / "cmp")]
    assert [r["agent"] for r in table["rows"]] == ["greedy", "megatron", "random"]
    assert table["seeds"] == [0, 1, 2, 3, 4]
    for statistic in ("mean", "iqm"):
        proc = subprocess.run([exe, "compare", "--from-traces", str(root / "cmp"),
                               "--statistic", statistic], check=True, capture_output=True,
                              text=True)
        cxx = {}
        row = r"^(\S+)\s+(\d+)\s+([\d.]+) \[.*?\]\s+([\d.]+) \[.*?\]\s+([\d.]+) \["
        for line in proc.stdout.splitlines():
            m = re.match(row, line)
            if m:
                cxx[m.group(1)] = [float(m.group(i)) for i in (3, 4, 5)]
        assert sorted(cxx) == ["greedy", "megatron", "random"]
        for r in table["rows"]:
            mine = [r[metric][statistic] for metric in ("throughput", "memory", "energy")]
            # The C++ table prints 2 decimals: the same numbers, rounded.
            assert [float(f"{v:.2f}") for v in mine] == cxx[r["agent"]], (statistic, r["agent"])
            ratios = r["ratios"]["throughput"]
            assert r["throughput"]["iqm"] == pytest.approx(
                metrics.aggregate_iqm(np.array(ratios)[:, None]))
    # The random agent is slower than Megatron-LM on the quickstart (a check that the ratios
    # are the agents' own, not a copy of the baseline's).
    rows = {r["agent"]: r for r in table["rows"]}
    assert rows["megatron"]["throughput"]["mean"] == 1.0
    assert rows["random"]["throughput"]["mean"] < 0.9


def test_learning_curves_come_from_learning_csv(runs, built, tmp_path):
    _, root = runs
    page = (built / "index.html").read_text()
    if _trained(root):
        from shardgym import report_learning
        cols, notes = report_learning.read(root / "train0" / "learning.csv")
        assert notes == [] and len(cols["update"]) == 2  # 2,048 steps on 8 envs: 2 updates
        assert np.all(cols["env_steps"] > cols["training_steps"])  # evaluations counted
        assert "-learning.png" in page and "no <code>learning.csv</code>" not in page
    else:
        assert "-learning.png" not in page and "no <code>learning.csv</code>" in page
    # A training run without learning.csv (older runs, --train-steps 0): said so, no curve
    # drawn from its evaluation episodes.
    run = tmp_path / "old"
    shutil.copytree(root / "train0", run)
    (run / "learning.csv").unlink(missing_ok=True)
    r = report.build_report([str(run)], tmp_path / "out", cli=cli(), reps=50)
    page = (tmp_path / "out" / "index.html").read_text()
    assert "no <code>learning.csv</code>, so no learning curve" in page
    assert not any("learning" in f for f in r["figures"])


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
                           "--skip-damaged", "--bootstrap-reps", "50"],
                          capture_output=True, text=True)
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
                           "--skip-damaged", "--bootstrap-reps", "50"],
                          capture_output=True, text=True)
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
                           "--skip-damaged", "--bootstrap-reps", "50"],
                          capture_output=True, text=True)
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
        f["episodes/episode_1"].attrs["complete"] = 0  # as a run killed during episode 1
    r = report.build_report([str(run)], tmp_path / "out", cli=cli(), reps=50)
    assert any("episode_1 is incomplete" in p for p in r["problems"])
    assert "episode_1 is incomplete" in (tmp_path / "out" / "index.html").read_text()


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

    stem, desc = report.fidelity([T("live.h5", [ep("live", plans, 0.2)]),
                                  T("sim.h5", [ep("sim", plans + 1, 0.02),
                                               ep("sim", plans, 0.02)])],
                                 tmp_path, "fidelity")
    assert stem == "fidelity" and (tmp_path / "fidelity.png").stat().st_size > 10_000
    assert (tmp_path / "fidelity.pdf").exists() and (tmp_path / "fidelity.svg").exists()
    assert desc.startswith("median simulator / live step latency 0.1;")
    assert report.fidelity([T("sim.h5", [ep("sim", plans, 0.02)])], tmp_path, "x") == \
        (None, None)


# ---- the page in a browser ----------------------------------------------------------------

PROBE = """<script>
window.addEventListener("load", function () {
  var bad = [];
  for (var i = 0; i < document.images.length; i++) {
    var im = document.images[i];
    if (!im.complete || im.naturalWidth === 0) bad.push(im.getAttribute("src"));
  }
  document.title = "PROBE " + JSON.stringify({broken: bad, images: document.images.length,
    height: document.documentElement.scrollHeight, width: document.documentElement.scrollWidth});
});
</script>"""
WIDTH = 1400


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def _run_chromium(exe, profile, *args):
    # --no-sandbox: the sandbox refuses to run as root (containers, CI); the page is ours.
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _probe(exe, page, tmp_path):
    """Loads a copy of `page` (same folder, so that the figures resolve) with PROBE added and
    returns what PROBE wrote into the title: broken images, image count, page size."""
    html_text = page.read_text().replace("</body>", PROBE + "</body>")
    copy = page.parent / f"_probe_{tmp_path.name}.html"
    copy.write_text(html_text)
    try:
        proc = _run_chromium(exe, tmp_path / "profile", f"--window-size={WIDTH},900",
                             "--virtual-time-budget=15000", "--dump-dom", copy.as_uri())
    finally:
        copy.unlink()
    m = re.search(r"<title>PROBE (.*?)</title>", proc.stdout, re.S)
    assert m, (proc.returncode, proc.stderr[-2000:])
    return json.loads(m.group(1).replace("&amp;", "&"))


def test_page_renders_in_a_headless_browser(built, tmp_path):
    """Every figure loads (naturalWidth > 0), nothing is wider than the window, the page is
    not endless, and a screenshot of it is a picture of the requested size."""
    from PIL import Image
    exe = _chromium()
    if exe is None:
        pytest.skip("no chromium binary (scripts/setup.sh installs Debian's chromium)")
    page = built / "index.html"
    got = _probe(exe, page, tmp_path)
    n = len(re.findall(r"<img ", page.read_text()))
    assert got["broken"] == [] and got["images"] == n == 7, got
    assert got["width"] <= WIDTH, got  # no horizontal scrolling
    assert got["height"] < 900 * n, got  # figures side by side: well under a screen each
    # The check sees a broken image when there is one.
    broken = built / "broken.html"
    broken.write_text(page.read_text().replace('src="suite-synthetic.png"', 'src="gone.png"'))
    assert _probe(exe, broken, tmp_path)["broken"] == ["gone.png"]
    broken.unlink()
    shot = tmp_path / "shot.png"
    height = min(got["height"], 8000)
    proc = _run_chromium(exe, tmp_path / "profile", f"--window-size={WIDTH},{height}",
                         "--virtual-time-budget=15000", f"--screenshot={shot}", page.as_uri())
    assert shot.exists(), proc.stderr[-2000:]
    img = Image.open(shot)
    assert img.size == (WIDTH, height)
    pixels = np.asarray(img.convert("RGB"))
    assert len(np.unique(pixels[::5, ::5].reshape(-1, 3), axis=0)) > 200  # figures drawn
    if os.environ.get("SHARDGYM_REPORT_SCREENSHOT"):
        shutil.copy(shot, os.environ["SHARDGYM_REPORT_SCREENSHOT"])
