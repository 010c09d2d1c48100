"""Parts of `shardgym report` on hand-made inputs (no CLI needed): learning.csv reading and
the learning curves' IQM, the Pareto points' intervals, the page's table of contents."""
import math

import numpy as np
import pytest

from report_fixtures import HEADER, learning_csv, seed_run

pytest.importorskip("rliable")
from shardgym import report, report_figures, report_learning, report_page  # noqa: E402
from shardgym.report_learning import LearningError  # noqa: E402


# ---- learning.csv ---------------------------------------------------------------------------

def test_read_gives_columns_and_empty_train_return_as_nan(tmp_path):
    path = learning_csv(tmp_path, [(1, 900, 1000, 0.5, 3.0, None), (2, 1800, 2100, 1.25, 4.5, 2.0)])
    cols, notes = report_learning.read(path)
    assert notes == []
    assert cols["env_steps"].tolist() == [1000, 2100] and cols["wall_s"].tolist() == [0.5, 1.25]
    assert math.isnan(cols["train_return"][0]) and cols["train_return"][1] == 2.0


@pytest.mark.parametrize("rows, header, message", [
    ([(1, 900, 1000, 0.5, 3.0, 1.0)], "update,env_steps,wall_s", "header is"),
    ([(1, 900, 1000, 0.5, 3.0, 1.0), (2, 1800, 2000, 1.0, "x", 1.0)], HEADER, ":3: could not"),
    ([(1, 900, 1000, 0.5, 3.0, 1.0), (2, 1800, 900, 1.0, 3.0, 1.0)], HEADER,
     ":3: needs 0 <= training_steps <= env_steps"),
    ([(1, 900, 1000, 0.5, 3.0, 1.0), (2, 1000, 1000, 0.4, 3.0, 1.0)], HEADER,
     ":3: env_steps or wall_s smaller than on the line before"),
    ([(1, 900, 1000, 0.5, "nan", 1.0)], HEADER, ":2: a value is not finite"),
    ([(1, 900, 1000, 0.5, 3.0)], HEADER, ":2: 5 fields, expected 6"),
])
def test_read_names_the_file_and_line_of_a_bad_row(tmp_path, rows, header, message):
    path = learning_csv(tmp_path, rows, header=header)
    with pytest.raises(LearningError, match=message) as e:
        report_learning.read(path)
    assert str(path) in str(e.value)


def test_a_last_line_cut_short_is_left_out_with_a_note(tmp_path):
    path = learning_csv(tmp_path, [(1, 900, 1000, 0.5, 3.0, 1.0), (2, 1800, 20)],
                        newline_at_end=False)
    cols, notes = report_learning.read(path)
    assert cols["update"].tolist() == [1] and "cut short" in notes[0]


def test_step_values_hold_an_update_until_the_next():
    got = report_learning.step_values(np.array([10.0, 20, 30]), [1.0, 2, 3],
                                      np.array([5.0, 10, 15, 20, 35]))
    assert np.isnan(got[0]) and got[1:].tolist() == [1, 1, 2, 3]


def test_grid_runs_from_the_latest_start_to_the_shortest_run_end(tmp_path):
    a = report_learning.read(seed_run(tmp_path / "a", 0, updates=8))[0]  # 1000..8000
    b = report_learning.read(seed_run(tmp_path / "b", 0, updates=5, offset=500))[0]  # ..5500
    grid, ev, tr = report_learning.common_grid([a, b], "env_steps")
    assert grid[0] == 1500 and grid[-1] == 5500 and not np.isnan(ev).any()
    # Between env steps 4500 and 5000: a's update 4 (at 4000; 5 comes at 5000), b's update 4
    # (at 4500), each seed's return held until its next update.
    k = np.flatnonzero((grid > 4500) & (grid < 5000))[0]
    assert ev[0, k] == 4 and ev[1, k] == 4
    k = np.flatnonzero((grid > 4000) & (grid < 4500))[0]
    assert ev[0, k] == 4 and ev[1, k] == 3
    assert report_learning.common_grid(
        [a, report_learning.read(seed_run(tmp_path / "c", 0, updates=2, offset=20000))[0]],
        "env_steps") is None  # no overlap


def test_curve_is_rliables_iqm_over_seeds_with_its_interval(tmp_path):
    """Four seeds at levels 0, 10, 20, 100 (same x): rliable's IQM (trim_mean 0.25) keeps the
    middle two, 10 and 20, so the curve is 15 + update; the mean (32.5 + update) would not
    be. The interval holds the point; one seed: an interval of width 0."""
    curves = [report_learning.read(seed_run(tmp_path / f"s{k}", level))[0]
              for k, level in enumerate((0, 10, 20, 100))]
    x, point, ci, train = report_learning.curve(curves, "env_steps", reps=200, seed=0)
    update = np.floor(x / 1000)
    assert np.allclose(point, 15 + update)
    # Train return: none ended before update 2 (empty field), then one less than the greedy.
    have = ~np.isnan(train)
    assert np.array_equal(have, update >= 2) and np.allclose(train[have], 14 + update[have])
    assert np.all(ci[0] <= point + 1e-9) and np.all(point <= ci[1] + 1e-9)
    assert np.any(ci[1] - ci[0] > 1)  # the seeds differ: a real interval
    x, point, ci, _ = report_learning.curve(curves[:1], "wall_s", reps=50, seed=0)
    assert np.allclose(ci[0], point) and np.allclose(ci[1], point)


def test_learning_logs_without_traces_make_a_page(tmp_path):
    for k, updates in enumerate((8, 6, 7)):
        seed_run(tmp_path / f"run{k}", 10 * k, updates=updates)
    out = tmp_path / "out"
    r = report.build_report([str(tmp_path / f"run{k}") for k in range(3)], out, reps=100)
    page = (out / "index.html").read_text()
    assert r["figures"] == ["training-runs-without-a-trace-learning"] and r["problems"] == []
    assert "runs end at 8000 / 6000 / 7000 env steps, the IQM is drawn to 6000 env steps" in page
    for ext in ("png", "pdf", "svg"):
        assert (out / f"training-runs-without-a-trace-learning.{ext}").stat().st_size > 5000


def test_a_bad_learning_log_is_named_or_skipped(tmp_path):
    seed_run(tmp_path / "good", 0)
    learning_csv(tmp_path / "bad", [(1, 900, 1000, 0.5, "oops", 1.0)])
    learning_csv(tmp_path / "empty", [])
    dirs = [str(tmp_path / d) for d in ("good", "bad", "empty")]
    with pytest.raises(report.ReportError, match=r"bad/learning.csv:2: could not convert"):
        report.build_report(dirs, tmp_path / "out", reps=50)
    r = report.build_report(dirs, tmp_path / "out", reps=50, skip_damaged=True)
    assert any("bad/learning.csv:2" in p and "left out" in p for p in r["problems"])
    assert any("empty/learning.csv: no update logged" in p for p in r["problems"])
    assert len(r["figures"]) == 1


# ---- Pareto ---------------------------------------------------------------------------------

class _Trace:
    def __init__(self, path, episodes):
        self.path, self.episodes = path, episodes


def _episode(agent, latency, energy, n=4):
    return {"attrs": {"agent": agent}, "rewards": np.ones(n),
            "metrics": {"ok": np.ones(n), "oom": np.zeros(n),
                        "step_latency_s": np.full(n, latency), "energy_j": np.full(n, energy)}}


def test_pareto_points_have_intervals_over_episodes(tmp_path):
    t = _Trace(tmp_path / "a.h5", [_episode("a", lat, 10 * lat) for lat in (1.0, 2.0, 3.0)] +
               [_episode("b", 0.5, 50.0)])
    pts = report_figures.pareto_points([t], reps=500, seed=0)
    n, (x, y), ((xlo, xhi), (ylo, yhi)) = pts["a"]
    assert n == 3 and (x, y) == pytest.approx((2.0, 20.0))
    assert 1.0 <= xlo < 2.0 < xhi <= 3.0 and 10.0 <= ylo < 20.0 < yhi <= 30.0
    n, point, ci = pts["b"]
    assert n == 1 and ci == ((0.5, 0.5), (50.0, 50.0))  # one episode: no error bar


def test_markers_that_would_hide_each_other_are_grouped(tmp_path):
    from shardgym.report_figures import _clusters, pareto_plot
    assert _clusters([(1.0, 1.0), (1.01, 1.0), (5.0, 5.0), (1.0, 1.02)]) == [[0, 1, 3], [2]]
    t = _Trace(tmp_path / "a.h5", [_episode("megatron", 1.0, 10.0), _episode("atp", 1.001, 10.0),
                                   _episode("replan", 0.5, 30.0)])
    stem, front, close = pareto_plot([t], tmp_path, "p", reps=50)
    assert stem == "p" and close == [["megatron", "atp"]]
    assert front == ["replan", "megatron"]  # atp: slower at the same energy


# ---- the page -------------------------------------------------------------------------------

def test_contents_nest_subsections_and_anchors_are_unique():
    anchors = report_page.Anchors()
    assert [anchors("A b"), anchors("A b"), anchors("!!")] == ["a-b", "a-b-2", "section"]
    body = ('<h2 id="x">X</h2><h3 id="x1">One</h3><h3 id="x2">Two <code>c</code></h3>'
            '<h2 id="y">Y</h2>')
    nav = report_page.toc(body)
    assert nav.count("<li>") == 4 and nav.index('href="#x2"') < nav.index('href="#y"')
    assert "Two c" in nav and "<code>" not in nav
    page = report_page.page("T", "<p>intro</p>", body)
    assert page.count('<a class="top" href="#top">') == 2  # one per h2


def test_a_vetting_binary_that_cannot_run_stops_the_report(tmp_path):
    """Not the trace's fault: named as such, even under --skip-damaged."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "a.h5").write_bytes(b"\x89HDF\r\n\x1a\n")
    with pytest.raises(report.CliError, match="cannot run .*/nonexistent to vet the traces"):
        report.build_report([str(tmp_path / "run")], tmp_path / "out",
                            cli=str(tmp_path / "nonexistent"), skip_damaged=True)
