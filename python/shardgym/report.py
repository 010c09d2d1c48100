"""Figures and tables from recorded runs: `python -m shardgym.report RUN_DIR... --out DIR`
(or `shardgym report`, which runs this module) writes DIR/index.html, every figure as PNG
(200 dpi), PDF and SVG, and DIR/table.json.

    python -m shardgym.report runs/compare-quickstart runs/train-s0 runs/train-s1 --out report

What it draws, per experiment (runs grouped by the config they were recorded with):
  * learning curves from the learning.csv of `shardgym train --out DIR` runs (one DIR = one
    training seed): greedy evaluation return against env steps and against wall time,
    rliable's IQM over seeds with stratified bootstrap 95 % bands (report_learning.py);
  * the plan of every block over the steps of one episode per agent (--episode);
  * step latency, peak memory and energy per step over that episode, the scenario's events
    (the `scenario.events` of the config text stored in the trace) marked;
  * mean step latency against mean energy per step per agent, 95 % intervals over episodes,
    Pareto front drawn;
  * the comparison table of each `shardgym compare --out DIR` folder, computed as
    `shardgym compare --from-traces DIR` does (experiments/compare_traces.cpp), summarised
    with rliable's IQM and stratified bootstrap intervals; also written to table.json;
  * simulator against live measurements where a sim and a live episode ran the same plans;
  * for each `shardgym suite --out` JSON given among the inputs, the suite's figures and
    tables (suite_report.py, suite_rliable.py).
An agent has the same colour in every figure (report_style.py); the one IQM is rliable's.

Traces are untrusted input and h5py parses them in this process, so each one is first read
by `shardgym inspect --json` (--cli, or $SHARDGYM_CLI), whose HDF5 parse runs in a child
process (datasets/isolated_read.h): a damaged file is named and refused before h5py opens it.
"""
import argparse
import collections
import html
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np

from shardgym import report_learning, report_page, suite_report
from shardgym import report_style as style
from shardgym.report_figures import (CI_LEVEL, chosen_episodes, fidelity,  # noqa: F401
                                     pareto_front, pareto_plot, plan_heatmaps,
                                     strategy_colours, time_series)


class ReportError(Exception):
    """Bad input (no traces, a damaged trace): main() prints it and exits 2."""


class CliError(ReportError):
    """The shardgym binary that vets the traces cannot be run (--skip-damaged does not help)."""


# ---- reading -------------------------------------------------------------------------------

def find_traces(run_dirs):
    """The .h5 files of each RUN_DIR (a folder, searched recursively, or a trace file) and
    the learning.csv files of its `shardgym train` runs: (traces, learning files)."""
    files, learning = [], []
    for d in run_dirs:
        p = pathlib.Path(d)
        if p.is_file():
            found, logs = [p], []
        elif p.is_dir():
            found = sorted(f for f in p.rglob("*.h5") if f.is_file())
            logs = sorted(f for f in p.rglob(report_learning.FILE) if f.is_file())
        else:
            raise ReportError(f"{d}: no such file or folder")
        if not found and not logs:
            raise ReportError(f"{d}: no trace (*.h5) in it; record one with `shardgym train`, "
                              f"`shardgym eval --out` or `shardgym compare --out`")
        files += [f for f in found if f not in files]
        learning += [f for f in logs if f not in learning]
    return files, learning


def vet(path, cli):
    """Reads `path` with `shardgym inspect --json` (HDF5 parsed in a child process); raises
    ReportError naming the file when it cannot be read (CliError when `cli` cannot be run at
    all: no trace's fault). Returns the inspect summary."""
    try:
        proc = subprocess.run([cli, "inspect", "--json", str(path)], capture_output=True,
                              text=True)
    except OSError as e:
        raise CliError(f"cannot run {cli} to vet the traces ({e.strerror or e}); give a "
                       f"working binary with --cli, or --no-vet") from None
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise ReportError(f"{path}: damaged or not a trace: {reason}")
    return json.loads(proc.stdout)


def check_figures(t, path):
    """Raises ValueError naming the trace when an episode's arrays do not agree with each other
    or hold impossible figures (the same rule as `compare --from-traces`,
    experiments/compare_traces.cpp): on every step that did not fail, latency finite and > 0,
    tokens finite and > 0, repartition time finite and >= 0, energy >= 0 or NaN; rewards finite;
    every plan id an entry of the strategy table."""
    for ep in t.episodes:
        where = f"{path}: {ep.get('name', '?')}"
        m, rewards = ep.get("metrics", {}), ep.get("rewards")
        if rewards is None or "plans" not in ep:
            raise ValueError(f"{where}: no rewards or plans")
        n = len(rewards)
        for key in ("ok", "oom", "tokens", "step_latency_s", "repartition_s", "energy_j",
                    "peak_memory_bytes"):
            if key not in m or len(m[key]) < n:
                raise ValueError(f"{where}: metrics/{key} missing or shorter than its {n} steps")
        if not np.all(np.isfinite(rewards)):
            raise ValueError(f"{where}: a reward is not finite")
        plans = np.asarray(ep["plans"])
        if plans.shape[:1] != (n,) or (plans.size and (plans.min() < 0 or
                                                        plans.max() >= len(t.strategies))):
            raise ValueError(f"{where}: plans of shape {plans.shape} or with ids outside the "
                             f"{len(t.strategies)} strategies")
        err_step = int(ep["attrs"].get("error_step", -1))
        good = (m["ok"][:n] != 0) & (m["oom"][:n] == 0) & (np.arange(n) != err_step)
        lat, tok = m["step_latency_s"][:n][good], m["tokens"][:n][good]
        rep, energy = m["repartition_s"][:n][good], m["energy_j"][:n][good]
        for name, bad in (("step_latency_s", ~(np.isfinite(lat) & (lat > 0))),
                          ("tokens", ~(np.isfinite(tok) & (tok > 0))),
                          ("repartition_s", ~(np.isfinite(rep) & (rep >= 0))),
                          ("energy_j", (energy < 0) | np.isinf(energy))):
            if np.any(bad):
                raise ValueError(f"{where}: metrics/{name} is impossible on a step that did not "
                                 f"fail")


def load_traces(files, cli, skip_damaged, problems):
    from shardgym import datasets
    traces = []
    for f in files:
        try:
            if cli:
                vet(f, cli)
            t = datasets.load(str(f))
            check_figures(t, f)
        except CliError:
            raise
        except (ReportError, OSError, ValueError, KeyError, IndexError, TypeError) as e:
            msg = str(e) if isinstance(e, ReportError) else f"{f}: damaged or not a trace: {e}"
            if not skip_damaged:
                raise ReportError(msg + " (--skip-damaged leaves it out)") from None
            problems.append(msg + "; left out")
            continue
        for name in t.incomplete:
            problems.append(f"{f}: {name} is incomplete (the run stopped during it); skipped")
        t.path = f
        t.experiment = _experiment_key(t.attrs.get("config", ""))
        traces.append(t)
    return traces


def _config(text):
    import yaml
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _experiment_key(text):
    doc = _config(text)
    return str(doc.get("name", "experiment")) + (" (" + doc["env"] + ")" if "env" in doc else "")


def scenario_events(config_text):
    """(step, label) of each scenario event in a config text (runtime/core/scenario.h)."""
    events = (_config(config_text).get("scenario") or {}).get("events") or []
    out = []
    for e in events:
        if not isinstance(e, dict) or "step" not in e:
            continue
        kind = e.get("kind", "?")
        if kind == "link_bandwidth":
            label = f"{e.get('link')} bandwidth x{e.get('factor')}"
        elif kind == "straggler":
            label = f"rank {e.get('rank')} compute x{e.get('factor')}"
        else:
            label = f"{kind} = {e.get('value')}"
        out.append((int(e["step"]), label))
    return sorted(out)


def summarize(ep):
    """One episode as experiments/compare_traces.cpp summarize_recorded() does it: the failed
    steps (not ok, out of memory, or the recorded error step) count only for the reward."""
    m = ep["metrics"]
    err_step = int(ep["attrs"].get("error_step", -1))
    n = len(ep["rewards"])
    failed = (m["ok"] == 0) | (m["oom"] != 0) | (np.arange(n) == err_step)
    good = ~failed
    tokens = float(np.sum(m["tokens"][good]))
    time_s = float(np.sum(m["step_latency_s"][good] + m["repartition_s"][good]))
    energy = float(np.sum(m["energy_j"][good]))
    peaks = m["peak_memory_bytes"][good]
    peak = float(np.nanmax(peaks)) if peaks.size and not np.all(np.isnan(peaks)) else 0.0
    return {"agent": ep["attrs"].get("agent", ""), "seed": int(ep["attrs"].get("seed", 0)),
            "steps": n, "failed_steps": int(failed.sum()), "return": float(ep["rewards"].sum()),
            "throughput": tokens / time_s if time_s > 0 else 0.0, "peak_memory_bytes": peak,
            "energy_per_token_j": energy / tokens if tokens > 0 else 0.0}


def compare_table(traces_in_dir, baseline="megatron"):
    """The rows of `shardgym compare --from-traces DIR` (experiments/compare_traces.cpp):
    agents in file order, per-seed ratios to the baseline's episode of the same seed."""
    order, runs = [], collections.OrderedDict()
    for t in sorted(traces_in_dir, key=lambda t: str(t.path)):
        for ep in t.episodes:
            s = summarize(ep)
            s["agent"] = s["agent"] or t.path.stem
            if s["agent"] not in runs:
                order.append(s["agent"])
                runs[s["agent"]] = {}
            runs[s["agent"]][s["seed"]] = s  # a later episode of a seed replaces an earlier one
    if baseline not in runs:
        return None, f"no episode of the baseline '{baseline}' ({baseline}.h5)"
    seeds = sorted(runs[baseline])
    ratio = lambda a, b: a / b if b > 0 else 0.0  # noqa: E731 (as compare_traces.cpp)
    rows, notes = [], []
    for agent in order:
        missing = [s for s in seeds if s not in runs[agent]]
        if missing:
            notes.append(f"{agent}: no episode of seed(s) {missing}, which the baseline has; "
                         f"left out (`compare --from-traces` refuses the folder)")
            continue
        mine, base = [runs[agent][s] for s in seeds], [runs[baseline][s] for s in seeds]
        rows.append({"agent": agent, "runs": len(seeds), "ratios": {
            "throughput": [ratio(a["throughput"], b["throughput"]) for a, b in zip(mine, base)],
            "memory": [ratio(a["peak_memory_bytes"], b["peak_memory_bytes"])
                       for a, b in zip(mine, base)],
            "energy": [ratio(a["energy_per_token_j"], b["energy_per_token_j"])
                       for a, b in zip(mine, base)]},
            "failed_runs": sum(e["failed_steps"] > 0 for e in mine)})
    return {"baseline": baseline, "seeds": seeds, "rows": rows, "notes": notes}, None


def interval_estimates(rows, reps, seed):
    """rliable's IQM (scipy.stats.trim_mean(x, 0.25), the IQM `shardgym compare` prints too)
    and mean per metric, with stratified bootstrap 95 % intervals (one task: the runs are the
    seeds)."""
    from rliable import metrics

    def agg(x):
        return np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x)])
    for metric in ("throughput", "memory", "energy"):
        scores = {r["agent"]: np.asarray(r["ratios"][metric], dtype=float)[:, None] for r in rows}
        point, ci = style.interval_estimates(scores, agg, reps, seed)
        for r in rows:
            r[metric] = {"iqm": float(point[r["agent"]][0]), "mean": float(point[r["agent"]][1]),
                         "iqm_ci": [float(v) for v in ci[r["agent"]][:, 0]],
                         "mean_ci": [float(v) for v in ci[r["agent"]][:, 1]]}


# ---- the page ------------------------------------------------------------------------------

def _files(ts):
    return html.escape(", ".join(str(t.path) for t in ts))


def _fmt(est):
    lo, hi = est["iqm_ci"]
    return f"{est['mean']:.2f}</td><td>{est['iqm']:.2f} <small>[{lo:.2f}, {hi:.2f}]</small>"


def table_html(folder, table):
    head = ("<tr><th rowspan='2'>agent</th><th rowspan='2'>runs</th>" + "".join(
        f"<th colspan='2'>{m}</th>" for m in ("throughput", "peak memory", "energy/token")) +
        "</tr><tr>" + "<th>mean</th><th>IQM [95% CI]</th>" * 3 + "</tr>")
    body = "".join(
        f"<tr><td>{style.swatch(r['agent'])}{html.escape(r['agent'])}</td><td>{r['runs']}</td>"
        f"<td>{_fmt(r['throughput'])}</td><td>{_fmt(r['memory'])}</td>"
        f"<td>{_fmt(r['energy'])}</td></tr>" for r in table["rows"])
    failed = [f"{r['agent']} in {r['failed_runs']} of {r['runs']} runs" for r in table["rows"]
              if r["failed_runs"]]
    notes = table["notes"] + (["ended by a failed step (only the steps before it count): " +
                               ", ".join(failed)] if failed else [])
    return (f"<div class='tablebox'><table>{head}{body}</table></div><p class='caption'>"
            f"Rebuilt from the traces in <code>{html.escape(str(folder))}</code> as "
            f"<code>shardgym compare --from-traces</code> computes it: every figure is the "
            f"agent's per-seed ratio to {table['baseline']}'s episode of the same seed (seeds "
            f"{table['seeds']}); throughput &gt; 1 is faster, peak memory and energy per token "
            f"&lt; 1 use less. Mean over seeds, and rliable's interquartile mean "
            f"(<code>scipy.stats.trim_mean(x, 0.25)</code>, the IQM <code>shardgym compare"
            f"</code> prints) with a stratified bootstrap 95% interval.</p>" +
            "".join(f"<p class='note'>{html.escape(n)}</p>" for n in notes))


def _agent_of(trace):
    for ep in trace.episodes if trace else ():
        if ep["attrs"].get("agent"):
            return str(ep["attrs"]["agent"])
    return None


def learning_runs(files, traces, skip_damaged, problems):
    """{experiment: {agent: [(label, columns), ...]}} from learning.csv files, one entry per
    run (seed); the trace.h5 beside each file names its experiment and agent."""
    beside = {t.path.parent: t for t in traces if t.path.name == "trace.h5"}
    runs = collections.OrderedDict()
    for f in files:
        try:
            cols, notes = report_learning.read(f)
        except report_learning.LearningError as e:
            if not skip_damaged:
                raise ReportError(f"{e} (--skip-damaged leaves it out)") from None
            problems.append(f"{e}; left out")
            continue
        problems += notes
        if len(cols["update"]) == 0:
            problems.append(f"{f}: no update logged (the run stopped before its first update); "
                            f"no learning curve")
            continue
        t = beside.get(f.parent)
        exp = t.experiment if t else "Training runs without a trace"
        runs.setdefault(exp, collections.OrderedDict()).setdefault(
            _agent_of(t) or "learner", []).append((f.parent.name, cols))
    return runs


def _learning_html(exp, learn, untrained, out, slug, reps, seed):
    parts = [f'<h3 id="{slug}-learning">Learning curves</h3>']
    if learn:
        stem, desc = report_learning.figure(learn, out, f"{slug}-learning", reps, seed)
        parts.append(style.figure_html(stem, (
            "Greedy evaluation return (held-out seed, after each update of vectorised "
            "training) against every env step the learner caused (training rollouts, its own "
            "searches and the evaluation episodes; left) and against wall time since training "
            "began (right), from each run's <code>learning.csv</code> (one run per seed). "
            "Thick: rliable's IQM over seeds, band: its stratified bootstrap 95% interval "
            f"({reps} resamples); dotted: IQM of the training episodes' mean return; thin: each "
            "seed. Each seed's curve is a step function (an update's return holds until the "
            "next update) read on a common grid from the latest first update to the end of "
            "the shortest run, so every IQM point has every seed; the thin lines go on to "
            "each run's end. " + html.escape("; ".join(desc.values())) + "."), wide=True))
    for t in untrained:
        parts.append(
            f"<p class='note'>{html.escape(str(t.path.parent))}: no "
            f"<code>{report_learning.FILE}</code>, so no learning curve: the run trained "
            f"nothing (<code>--train-steps 0</code>, or an agent that learns during its "
            f"episodes) or was recorded before <code>shardgym train</code> wrote it. Its "
            f"{len(t.episodes)} recorded episode(s) evaluate the agent; they are in the "
            f"figures below, not drawn as learning.</p>")
    return "".join(parts)


def build_report(run_dirs, out, episode=0, cli=None, reps=2000, seed=0, skip_damaged=False):
    """Writes out/index.html and its figures; returns {"figures", "tables", "problems"}."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    problems = []
    # `shardgym suite --out` JSONs among the inputs: a section each (shardgym/suite_report.py).
    suites = [d for d in run_dirs if str(d).endswith(".json") and pathlib.Path(d).is_file()]
    run_dirs = [d for d in run_dirs if d not in suites]
    files, logs = find_traces(run_dirs) if run_dirs else ([], [])
    traces = load_traces(files, cli, skip_damaged, problems)
    learning = learning_runs(logs, traces, skip_damaged, problems)
    if not suites and not learning and not any(t.episodes for t in traces):
        raise ReportError("no complete episode in " + ", ".join(str(f) for f in files))
    suite_sections = []
    for path in suites:
        try:
            suite_sections.append(suite_report.section(path, out, reps, seed))
        except suite_report.SuiteReportError as e:
            raise ReportError(str(e)) from e
    groups = collections.OrderedDict()
    for t in traces:
        if t.episodes:
            groups.setdefault(t.experiment, []).append(t)
    for exp in learning:
        groups.setdefault(exp, [])
    chosen = {exp: chosen_episodes(ts, episode) for exp, ts in groups.items()}
    strategies = strategy_colours(list(chosen.values()))  # one colour per strategy, all figures
    anchors = report_page.Anchors()
    sections, tables = [], {}
    for exp, ts in groups.items():
        slug = anchors(exp)
        parts = [f'<section><h2 id="{slug}">{html.escape(exp)}</h2>']
        untrained = [t for t in ts if t.path.name == "trace.h5"
                     and not (t.path.parent / report_learning.FILE).exists()]
        if exp in learning or untrained:
            parts.append(_learning_html(exp, learning.get(exp), untrained, out, slug, reps,
                                        seed))
        if not chosen[exp]:
            if ts:
                parts.append("<p class='note'>No episode with steps: nothing to draw.</p>")
            sections.append("".join(parts) + "</section>")
            continue
        which = html.escape("; ".join(f"{a}: {t.path}:{ep['name']}" for a, t, ep in chosen[exp]))
        plans = plan_heatmaps(chosen[exp], out, f"{slug}-plans", strategies)
        events = scenario_events(ts[0].attrs.get("config", ""))
        series = time_series(chosen[exp], events, out, f"{slug}-timeseries")
        ev = "; ".join(f"from env step {s} on: {label}" for s, label in events) or "none (static)"
        parts.append(
            f'<h3 id="{slug}-episodes">Plans and time series</h3><div class="row">' +
            style.figure_html(plans, (
                f"The strategy of every block (rows) at every env step (columns) for one "
                f"episode per agent (episode {episode} of each agent's complete episodes, or its "
                f"last); a strategy has the same colour in every plan figure of this page. "
                f"Episodes: {which}.")) +
            style.figure_html(series, (
                f"Per-step latency (one training iteration), peak memory of the fullest rank and "
                f"energy of the whole world (iteration and repartition) over the same episodes. "
                f"Dashed lines: the scenario's events from the config stored in the traces "
                f"({html.escape(ev)}).")) + "</div>")
        stem, front, close = pareto_plot(ts, out, f"{slug}-pareto", reps, seed)
        same = "".join(f" (Nearly) at the same point, markers moved apart with a leader line "
                       f"to the point (black dot): {html.escape(', '.join(g))}." for g in close)
        cmp_html = []
        for folder in sorted({t.path.parent for t in ts}):
            # `shardgym compare --out` folders: one <agent>.h5 each, megatron.h5 the baseline.
            in_dir = [t for t in ts if t.path.parent == folder and t.path.name != "trace.h5"]
            if not (folder / "megatron.h5").exists():
                continue
            table, why = compare_table(in_dir)
            if table is None:
                problems.append(f"{folder}: no comparison table: {why}")
                continue
            interval_estimates(table["rows"], reps, seed)
            tables[str(folder)] = table
            cmp_html.append(f'<h3 id="{anchors(slug + "-compare")}">Comparison: '
                            f'{html.escape(str(folder))}</h3>' + table_html(folder, table))
        pareto_html = style.figure_html(stem, (
            f"Per agent: mean step latency against mean energy per step (steps that did not "
            f"fail), the mean over its complete episodes with rliable's stratified bootstrap "
            f"95% intervals over episodes as error bars (none for one episode). Dashed: the "
            f"Pareto front ({html.escape(', '.join(front))}); shaded: the region it "
            f"dominates.{same} Traces: {_files(ts)}.")) if stem else (
            "<p class='note'>No latency-energy figure: no episode has a step that did not fail "
            "with its energy measured.</p>")
        parts.append(f'<h3 id="{slug}-pareto">Latency against energy</h3><div class="row">' +
                     pareto_html + f"<div>{''.join(cmp_html)}</div></div></section>")
        sections.append("".join(parts))
    stem, desc = fidelity(traces, out, "fidelity")
    if stem:
        sections.append(
            f'<section><h2 id="{anchors("fidelity")}">Simulator against live runs</h2>' +
            style.figure_html(stem, (
                "Per step, the simulator's latency and peak memory (y) against the live "
                "runtime's measurement (x) for episodes that ran the same plans from the same "
                f"seed; on the dashed line the simulator is exact. Pairs: {html.escape(desc)}."),
                wide=True) + "</section>")
    body = "".join(suite_sections) + "".join(sections)
    if problems:
        body = ('<section><h2 id="problems">Problems</h2><ul>' +
                "".join(f"<li>{html.escape(p)}</li>" for p in problems) + "</ul></section>" + body)
    agents = list(dict.fromkeys(
        [a for path in suites for a in suite_report.load(path)["agents_seen"]] +
        [a for ts in groups.values() for a, _, _ in chosen_episodes(ts, 0)] +
        [a for runs in learning.values() for a in runs]))
    inputs = html.escape(", ".join(map(str, run_dirs + suites)))
    intro = (f"<p>From {len(files)} trace file(s), {len(logs)} learning log(s) and "
             f"{len(suites)} suite JSON(s): {inputs}. Every interval is a 95% interval; "
             f"every IQM is rliable's (the mean of the middle 50%, "
             f"<code>scipy.stats.trim_mean(x, 0.25)</code>). Each figure links its PDF and SVG "
             f"beside the PNG.</p>" + (style.key_html(agents) if agents else ""))
    (out / "index.html").write_text(report_page.page("ShardGym report", intro, body))
    (out / "table.json").write_text(json.dumps(tables, indent=1))
    for p in problems:
        print(f"shardgym report: {p}", file=sys.stderr)
    figures = sorted(re.findall(r'<img src="([^"]+)\.png"', body))
    return {"figures": figures, "tables": tables, "problems": problems, "agents": agents}


def _default_cli():
    cli = os.environ.get("SHARDGYM_CLI")
    if cli:
        return cli
    root = pathlib.Path(__file__).resolve().parents[2]
    for d in ("build", "build-notorch"):
        if (root / d / "experiments" / "shardgym").exists():
            return str(root / d / "experiments" / "shardgym")
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m shardgym.report",
        description="Figures and tables from recorded ShardGym runs: writes OUT/index.html "
                    "(with a table of contents), each figure as PNG (200 dpi), PDF and SVG, "
                    "and OUT/table.json (the comparison tables).",
        epilog="RUN_DIR: a folder written by `shardgym train --out` (learning.csv: learning "
               "curves; several folders = several seeds), `shardgym compare --out` (one "
               "<agent>.h5 per agent: a comparison table against megatron.h5) or `shardgym "
               "eval --out`, a trace file, or a `shardgym suite --out` JSON (profiles, "
               "probability of improvement). Episodes the run did not finish are reported "
               "and skipped. Example: python -m shardgym.report runs/compare runs/train-s0 "
               "runs/train-s1 runs/suite.json --out report/")
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                        help="folders of traces and learning logs, trace files, suite JSONs")
    parser.add_argument("--out", required=True, help="output folder (created)")
    parser.add_argument("--episode", type=int, default=0,
                        help="which complete episode of each agent the plan and time figures "
                             "show (default 0, the first; an agent with fewer: its last)")
    parser.add_argument("--cli", default=_default_cli(),
                        help="the shardgym binary whose `inspect --json` vets each trace in a "
                             "child process before h5py reads it (default: $SHARDGYM_CLI, "
                             "else build/experiments/shardgym of this checkout)")
    parser.add_argument("--no-vet", action="store_true",
                        help="read the traces with h5py only (a damaged file can crash it)")
    parser.add_argument("--skip-damaged", action="store_true",
                        help="leave damaged traces out (listed in the report) instead of failing")
    parser.add_argument("--bootstrap-reps", type=int, default=2000,
                        help="bootstrap resamples of the bands and intervals (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    args = parser.parse_args(argv)
    if args.episode < 0 or args.bootstrap_reps < 1:
        parser.error("--episode must be >= 0 and --bootstrap-reps >= 1")
    cli = None if args.no_vet else args.cli
    if cli is None and not args.no_vet:
        print("shardgym report: no shardgym binary to vet the traces with (--cli); h5py reads "
              "them unchecked", file=sys.stderr)
    try:
        r = build_report(args.run_dirs, args.out, args.episode, cli, args.bootstrap_reps,
                         args.seed, args.skip_damaged)
    except ReportError as e:
        print(f"shardgym report: {e}", file=sys.stderr)
        return 2
    print(f"{pathlib.Path(args.out) / 'index.html'}: {len(r['figures'])} figures, "
          f"{len(r['tables'])} comparison table(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
