"""The suite figure and table (shardgym/suite_report.py) from a `shardgym suite --out` JSON made
by this build's CLI on a tiny two-instance suite, and through `shardgym report`."""
import json
import subprocess
from pathlib import Path

import pytest

from conftest import cli
from shardgym import suite_report

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
    exe = cli()
    if exe is None:
        pytest.skip("no shardgym CLI (set SHARDGYM_BINARY_DIR to a build)")
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
