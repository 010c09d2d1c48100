"""Figures and tables from recorded traces: `python -m shardgym.report RUN_DIR... --out DIR`
(or `shardgym report`, which runs this module) writes DIR/index.html with PNG figures
(drawn by shardgym/report_figures.py).

    python -m shardgym.report runs/compare-quickstart runs/train-s0 runs/train-s1 --out report

What it draws, per experiment (traces grouped by the config they were recorded with):
  * learning curves: episode return against episode, mean over runs with a bootstrap 95 %
    band, for traces written by `shardgym train` (DIR/trace.h5; one run = one seed);
  * the plan of every block over the steps of one episode per agent (--episode);
  * step latency, peak memory and energy per step over that episode, the scenario's events
    (the `scenario.events` of the config text stored in the trace) marked;
  * mean step latency against mean energy per step, one point per agent, Pareto front drawn;
  * the comparison table of each `shardgym compare --out DIR` folder, computed as
    `shardgym compare --from-traces DIR` does (experiments/compare_traces.cpp), summarised
    with rliable's IQM and stratified bootstrap intervals; also written to table.json;
  * simulator against live measurements where a sim and a live episode ran the same plans;
  * for each `shardgym suite --out` JSON given among the inputs, the suite's figure and table
    (shardgym/suite_report.py).

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

from shardgym import suite_report
from shardgym.report_figures import (CI_LEVEL, chosen_episodes, fidelity,  # noqa: F401
                                     learning_curves, pareto_front, pareto_plot,
                                     plan_heatmaps, time_series)


class ReportError(Exception):
    """Bad input (no traces, a damaged trace): main() prints it and exits 2."""


# ---- reading -------------------------------------------------------------------------------

def find_traces(run_dirs):
    """The .h5 files of each RUN_DIR (a folder, searched recursively, or a trace file)."""
    files = []
    for d in run_dirs:
        p = pathlib.Path(d)
        if p.is_file():
            found = [p]
        elif p.is_dir():
            found = sorted(f for f in p.rglob("*.h5") if f.is_file())
        else:
            raise ReportError(f"{d}: no such file or folder")
        if not found:
            raise ReportError(f"{d}: no trace (*.h5) in it; record one with `shardgym train`, "
                              f"`shardgym eval --out` or `shardgym compare --out`")
        files += [f for f in found if f not in files]
    return files


def vet(path, cli):
    """Reads `path` with `shardgym inspect --json` (HDF5 parsed in a child process); raises
    ReportError naming the file when it cannot be read. Returns the inspect summary."""
    proc = subprocess.run([cli, "inspect", "--json", str(path)], capture_output=True, text=True)
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
    if not any(t.episodes for t in traces):
        raise ReportError("no complete episode in " + ", ".join(str(f) for f in files))
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
    """rliable's IQM and mean per metric with stratified bootstrap 95 % intervals (one task:
    the runs are the seeds). rliable's IQM trims whole runs (scipy.stats.trim_mean(x, 0.25));
    `shardgym compare` weighs the runs straddling the quartiles fractionally, so the two IQMs
    differ unless there are 2 seeds or a multiple of 4; the means are the same."""
    import warnings

    from rliable import library as rly
    from rliable import metrics

    def agg(x):
        return np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x)])
    for metric in ("throughput", "memory", "energy"):
        scores = {r["agent"]: np.asarray(r["ratios"][metric], dtype=float)[:, None] for r in rows}
        with warnings.catch_warnings():  # arch's notice that random_state is deprecated
            warnings.simplefilter("ignore", FutureWarning)
            point, ci = rly.get_interval_estimates(scores, agg, reps=reps,
                                                   confidence_interval_size=CI_LEVEL,
                                                   random_state=np.random.RandomState(seed))
        for r in rows:
            r[metric] = {"iqm": float(point[r["agent"]][0]), "mean": float(point[r["agent"]][1]),
                         "iqm_ci": [float(v) for v in ci[r["agent"]][:, 0]],
                         "mean_ci": [float(v) for v in ci[r["agent"]][:, 1]]}


# ---- the page ------------------------------------------------------------------------------

def _slug(text):
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "experiment"


def _figure(png, caption):
    return (f'<figure><img src="{html.escape(png)}" alt="{html.escape(png)}">'
            f"<figcaption>{caption}</figcaption></figure>")


def _files(ts):
    return html.escape(", ".join(str(t.path) for t in ts))


def _fmt(est):
    lo, hi = est["iqm_ci"]
    return f"{est['mean']:.2f}</td><td>{est['iqm']:.2f} [{lo:.2f}, {hi:.2f}]"


def table_html(folder, table):
    head = ("<tr><th>agent</th><th>runs</th>" + "".join(
        f"<th>{m} mean</th><th>{m} IQM [95% CI]</th>"
        for m in ("throughput", "peak memory", "energy/token")) + "</tr>")
    body = "".join(
        f"<tr><td>{html.escape(r['agent'])}</td><td>{r['runs']}</td><td>{_fmt(r['throughput'])}"
        f"</td><td>{_fmt(r['memory'])}</td><td>{_fmt(r['energy'])}</td></tr>"
        for r in table["rows"])
    failed = [f"{r['agent']} in {r['failed_runs']} of {r['runs']} runs" for r in table["rows"]
              if r["failed_runs"]]
    notes = table["notes"] + (["ended by a failed step (only the steps before it count): " +
                               ", ".join(failed)] if failed else [])
    return (f"<table>{head}{body}</table><p class='caption'>Rebuilt from the traces in "
            f"<code>{html.escape(str(folder))}</code> as <code>shardgym compare --from-traces"
            f"</code> computes it: every figure is the agent's per-seed ratio to "
            f"{table['baseline']}'s episode of the same seed (seeds {table['seeds']}); "
            f"throughput &gt; 1 is faster, peak memory and energy per token &lt; 1 use less. "
            f"Mean over seeds, and rliable's interquartile mean with a stratified bootstrap "
            f"95% interval. rliable's IQM trims whole runs, <code>shardgym compare</code>'s "
            f"weighs the runs at the quartiles fractionally: they agree for 2 seeds and for "
            f"multiples of 4 (the means always agree).</p>" +
            "".join(f"<p class='note'>{html.escape(n)}</p>" for n in notes))


def build_report(run_dirs, out, episode=0, cli=None, reps=2000, seed=0, skip_damaged=False):
    """Writes out/index.html and its figures; returns {"pages": ..., "tables": ...}."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    problems = []
    # `shardgym suite --out` JSONs among the inputs: a section each (shardgym/suite_report.py).
    suites = [d for d in run_dirs if str(d).endswith(".json") and pathlib.Path(d).is_file()]
    run_dirs = [d for d in run_dirs if d not in suites]
    suite_sections = []
    for path in suites:
        try:
            suite_sections.append(suite_report.section(path, out))
        except suite_report.SuiteReportError as e:
            raise ReportError(str(e)) from e
    traces = load_traces(find_traces(run_dirs), cli, skip_damaged, problems) if run_dirs else []
    rng = np.random.default_rng(seed)
    groups = collections.OrderedDict()
    for t in traces:
        if t.episodes:
            groups.setdefault(t.experiment, []).append(t)
    sections, tables, figures = [], {}, []
    for exp, ts in groups.items():
        slug, parts = _slug(exp), [f"<h2>{html.escape(exp)}</h2>"]
        training = [t for t in ts if t.path.name == "trace.h5"]
        if training:
            png, desc = learning_curves(training, out, f"{slug}-learning.png", reps, rng)
            figures.append(png)
            parts.append(_figure(png, (
                "Episode return against episode for the traces written by <code>shardgym train"
                "</code> (one run per trace, e.g. one per seed): the line is the mean over runs, "
                "the band a bootstrap 95% interval of that mean over runs (drawn with 2 or "
                f"more runs). {html.escape(desc)}. Traces: {_files(training)}.")))
        chosen = chosen_episodes(ts, episode)
        if not chosen:
            parts.append("<p class='note'>No episode with steps: nothing to draw.</p>")
            sections.append("\n".join(parts))
            continue
        png = plan_heatmaps(chosen, out, f"{slug}-plans.png")
        figures.append(png)
        which = html.escape("; ".join(f"{a}: {t.path}:{ep['name']}" for a, t, ep in chosen))
        parts.append(_figure(png, (
            f"The strategy of every block (rows) at every env step (columns), colour = strategy "
            f"id in the trace's strategy table, for one episode per agent (episode {episode} of "
            f"each agent's complete episodes, or its last): {which}.")))
        events = scenario_events(ts[0].attrs.get("config", ""))
        png = time_series(chosen, events, out, f"{slug}-timeseries.png")
        figures.append(png)
        ev = "; ".join(f"from env step {s} on: {label}" for s, label in events) or "none (static)"
        parts.append(_figure(png, (
            f"Per-step latency (one training iteration), peak memory of the fullest rank and "
            f"energy of the whole world (iteration and repartition) over the same episodes. "
            f"Dashed lines: the scenario's events from the config stored in the traces "
            f"({html.escape(ev)}). Traces: {which}.")))
        png, front = pareto_plot(ts, out, f"{slug}-pareto.png")
        figures.append(png)
        parts.append(_figure(png, (
            f"One point per agent: mean step latency against mean energy per step over all its "
            f"complete episodes (failed steps left out). Red: the Pareto front "
            f"({html.escape(', '.join(front))}). Traces: {_files(ts)}.")))
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
            parts.append(f"<h3>Comparison: {html.escape(str(folder))}</h3>" +
                         table_html(folder, table))
        sections.append("\n".join(parts))
    png, desc = fidelity(traces, out, "fidelity.png")
    if png:
        figures.append(png)
        sections.append("<h2>Simulator against live runs</h2>" + _figure(png, (
            "Per step, the simulator's latency and peak memory (y) against the live runtime's "
            "measurement (x) for episodes that ran the same plans from the same seed; on the "
            f"dashed line the simulator is exact. Pairs: {html.escape(desc)}.")))
    problem_html = "".join(f"<li>{html.escape(p)}</li>" for p in problems)
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>ShardGym report</title><style>
body {{ font-family: sans-serif; max-width: 1150px; margin: 2em auto; }}
img {{ max-width: 100%; }} figcaption, .caption {{ color: #333; margin-bottom: 2em; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #bbb; padding: 3px 8px; }}
td {{ text-align: right; }} td:first-child {{ text-align: left; }} .note {{ color: #a00; }}
</style></head><body>
<h1>ShardGym report</h1>
<p>From {len(traces)} trace file(s) under {html.escape(', '.join(map(str, run_dirs)))}.</p>
{"<h2>Problems</h2><ul>" + problem_html + "</ul>" if problems else ""}
{"".join(suite_sections)}
{"".join(sections)}
</body></html>
"""
    (out / "index.html").write_text(page)
    (out / "table.json").write_text(json.dumps(tables, indent=1))
    for p in problems:
        print(f"shardgym report: {p}", file=sys.stderr)
    return {"figures": figures, "tables": tables, "problems": problems}


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
        description="Figures and tables from recorded ShardGym traces: writes OUT/index.html, "
                    "one PNG per figure and OUT/table.json (the comparison tables).",
        epilog="RUN_DIR: a folder written by `shardgym train --out` (trace.h5: drawn as a "
               "learning curve; several folders = several seeds), `shardgym compare --out` "
               "(one <agent>.h5 per agent: a comparison table against megatron.h5) or "
               "`shardgym eval --out`, or a trace file. Episodes the run did not finish are "
               "reported and skipped. Example: python -m shardgym.report runs/compare "
               "--out report/")
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="folders of traces")
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
