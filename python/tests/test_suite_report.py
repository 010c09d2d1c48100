"""The suite figures and tables (shardgym/suite_report.py, suite_rliable.py) from a `shardgym
suite --out` JSON made by this build's CLI on a tiny suite, through `shardgym report`, and
from a hand-made JSON whose statistics are known."""
import json
import subprocess

import numpy as np
import pytest

from conftest import cli_or_skip
import report_fixtures
from report_fixtures import INSTANCES

pytest.importorskip("rliable")
from shardgym import suite_report, suite_rliable  # noqa: E402

TASK = """name: tiny-stragglers
model: {layers: 2, hidden: 2048, heads: 16, seq: 1024, micro_batch: 1, global_batch: 16}
cluster:
  devices: [{name: d, peak_tflops: {bf16: 300}, memory_gib: 80, memory_bw_gbs: 2000,
             idle_w: 50, busy_w: 400}]
  links: [{name: nv, bandwidth_gbs: 300, latency_us: 3},
          {name: ib, bandwidth_gbs: 200, latency_us: 5}]
  nodes: [{device: d, gpus: 4, intra_link: nv, count: 2}]
  inter_link: ib
scenario:
  noise: 0.0
  draw: [{kind: straggler, count: 1, start: [3, 8], duration: 8, factor: 2.0}]
data_shares: {groups: 2}
steps_per_episode: 20
"""


@pytest.fixture(scope="module")
def suite_json(tmp_path_factory):
    exe = cli_or_skip()
    root = tmp_path_factory.mktemp("suite")
    (root / "task.yaml").write_text(TASK)
    (root / "suite.yaml").write_text(
        "name: tiny\ntasks: [task.yaml]\ntrain_instances: {first: 100, count: 2}\n"
        "test_instances: [0, 1, 2]\n")
    out = root / "suite.json"
    subprocess.run([exe, "suite", str(root / "suite.yaml"), "--agents", "replan,atp",
                    "--out", str(out)], check=True, capture_output=True)
    return exe, out


def test_figure_and_table_show_every_agent(suite_json, tmp_path):
    _, path = suite_json
    data = suite_report.load(path)
    assert {r["agent"] for r in data["rows"]} == {"megatron", "hindsight-static",
                                                  "dynamic-oracle", "replan", "atp"}
    assert suite_report.main([str(path), "--out", str(tmp_path)]) == 0
    png = tmp_path / "suite-tiny.png"
    assert png.stat().st_size > 10_000
    assert (tmp_path / "suite-tiny.svg").read_text().lstrip().startswith("<?xml")
    assert (tmp_path / "suite-tiny.pdf").read_bytes().startswith(b"%PDF")
    # The per-episode records give the rliable figures too.
    for stem in ("suite-tiny-profiles", "suite-tiny-improvement"):
        assert (tmp_path / f"{stem}.png").stat().st_size > 10_000, stem
    page = (tmp_path / "index.html").read_text()
    oracle = next(r for r in data["rows"] if r["agent"] == "dynamic-oracle")
    assert f"{oracle['vs_hindsight']['point']:.3f}" in page  # the table carries the numbers


def test_shardgym_report_draws_a_suite_json(suite_json, tmp_path):
    exe, path = suite_json
    proc = subprocess.run([exe, "report", str(path), "--out", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "Task suite tiny" in (tmp_path / "index.html").read_text()


def test_what_is_not_a_suite_json_is_refused(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"rows": []}))
    with pytest.raises(suite_report.SuiteReportError, match="not a `shardgym suite` JSON"):
        suite_report.load(bad)
    bad.write_text(json.dumps({"suite": "s", "rows": []}))
    with pytest.raises(suite_report.SuiteReportError, match="no rows"):
        suite_report.load(bad)
    bad.write_text("{")
    with pytest.raises(suite_report.SuiteReportError, match="not readable as JSON"):
        suite_report.load(bad)


# ---- hand-made suite: known statistics ------------------------------------------------------

@pytest.fixture
def synthetic(tmp_path):
    return report_fixtures.suite_json(tmp_path / "synthetic.json")


def test_scores_are_normalised_per_instance_by_hindsight_static(synthetic):
    scores, tasks, instances, notes = suite_rliable.normalised_scores(
        suite_report.load(synthetic))
    assert tasks == ["alpha", "beta"] and instances == INSTANCES and notes == []
    assert np.all(scores["hindsight-static"] == 1.0)
    assert np.allclose(scores["megatron"], 0.8)
    # Learners: runs = training seeds x instances (seed-major), here 2 x 6.
    assert scores["ppo(polish=0)"].shape == (12, 2)
    assert np.allclose(scores["ppo(polish=0)"][:6], 0.9)
    assert np.allclose(scores["ppo(polish=0)"][6:], 0.95)


def test_an_episode_a_failed_step_ended_scores_zero(synthetic):
    data = suite_report.load(synthetic)
    e = next(e for e in data["episodes"] if e["agent"] == "megatron")
    e["throughput"] *= 100  # it stopped early: what it played looks fast
    e["failed"] = True
    scores, _, _, notes = suite_rliable.normalised_scores(data)
    assert np.count_nonzero(scores["megatron"] == 0.0) == 1
    assert notes == ["megatron: 1 episode ended by a failed step, scored 0"]


def test_probability_of_improvement_and_profiles_are_rliables():
    """The vectorised functions the bootstrap calls equal rliable's own, ties included."""
    from rliable import library, metrics
    rng = np.random.default_rng(3)
    for _ in range(20):
        x = rng.integers(0, 4, size=(rng.integers(1, 9), 3)).astype(float)
        y = rng.integers(0, 4, size=(rng.integers(1, 9), 3)).astype(float)
        assert suite_rliable.probability_of_improvement(x, y) == pytest.approx(
            metrics.probability_of_improvement(x, y), abs=1e-12)
        taus = np.linspace(-0.5, 4.5, 11)
        assert np.allclose(suite_rliable.run_score_distribution(x, taus),
                           library.score_distributions(x, taus))
    same = rng.random((5, 2))
    assert suite_rliable.probability_of_improvement(same, same) == 0.5


def test_estimates_have_the_known_values(synthetic):
    scores, *_ = suite_rliable.normalised_scores(suite_report.load(synthetic))
    before = np.random.get_state()[1].copy()
    est = suite_rliable.estimates(scores, reps=200, seed=0)
    assert np.array_equal(np.random.get_state()[1], before)  # numpy's global RNG restored
    poi = est["poi"]
    assert poi["replan,hindsight-static"][0] == pytest.approx(0.5)  # above on half
    assert poi["dynamic-oracle,hindsight-static"][0] == 1.0
    assert poi["megatron,replan"][0] == 0.0
    assert poi["hindsight-static,replan"][0] == pytest.approx(0.5)
    assert "replan,replan" not in poi and "hindsight-static,hindsight-static" not in poi
    lo, hi = poi["replan,hindsight-static"][1]
    assert 0.0 < lo < 0.5 < hi < 1.0  # resampling instances moves it both ways
    # rliable's IQM: trim_mean(0.25) over runs x tasks; ppo: 12 x 0.9 and 12 x 0.95.
    assert est["iqm"]["dynamic-oracle"][0] == pytest.approx(1.1)
    assert est["iqm"]["ppo(polish=0)"][0] == pytest.approx(0.925)
    # Profiles: at tau just under 1, every episode of hindsight-static is above, none of
    # megatron's; the same seed gives the same intervals.
    k = np.searchsorted(est["taus"], 0.99)
    assert est["profiles"]["hindsight-static"][k] == 1.0
    assert est["profiles"]["megatron"][k] == 0.0
    again = suite_rliable.estimates(scores, reps=200, seed=0)
    assert again["poi"] == est["poi"]


def test_a_task_without_every_agent_is_left_out_and_named(tmp_path):
    path = report_fixtures.suite_json(tmp_path / "s.json", drop=(("beta", "replan"),))
    scores, tasks, _, notes = suite_rliable.normalised_scores(suite_report.load(path))
    assert tasks == ["alpha"] and scores["replan"].shape == (6, 1)
    assert any("task beta left out" in n and "replan" in n for n in notes), notes


def test_without_hindsight_static_the_section_says_why(tmp_path):
    path = report_fixtures.suite_json(tmp_path / "s.json", agents=("megatron", "replan"))
    page = suite_report.section(path, tmp_path, reps=50)
    assert "no hindsight-static episodes to normalise by" in page
    assert not (tmp_path / "suite-synthetic-profiles.png").exists()
    old = json.loads(path.read_text())
    old.pop("episodes")  # a JSON of a `shardgym suite` that wrote no episode records
    assert "no per-episode records" in suite_rliable.normalised_scores(old)[3][0]
    bad = json.loads(path.read_text())
    bad["episodes"][0].pop("throughput")
    path.write_text(json.dumps(bad))
    assert "an episode record without" in suite_report.section(path, tmp_path, reps=50)


def test_suite_page_links_every_figure_in_three_formats(synthetic, tmp_path):
    out = tmp_path / "out"
    assert suite_report.main([str(synthetic), "--out", str(out), "--bootstrap-reps", "100"]) == 0
    page = (out / "index.html").read_text()
    for stem in ("suite-synthetic", "suite-synthetic-profiles", "suite-synthetic-improvement"):
        assert f'<img src="{stem}.png"' in page
        for ext in ("pdf", "svg"):
            assert f'href="{stem}.{ext}"' in page and (out / f"{stem}.{ext}").stat().st_size
    assert "P(&gt; replan)" in page and 'href="#suite-synthetic-rliable"' in page
