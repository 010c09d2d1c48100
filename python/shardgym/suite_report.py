"""The figures and tables of a task suite's results (`shardgym suite --out FILE`,
docs/suite.md):
  * per task, each agent's throughput over the best static plan in hindsight with its 95 %
    bootstrap interval over test instances (the suite's own numbers), the dynamic oracle's
    point marking the headroom;
  * from the per-episode records, each episode's throughput normalised by hindsight-static's
    on the same (task, instance): rliable's performance profiles and IQM with stratified
    bootstrap 95 % intervals, and rliable's probability of improvement of each agent over
    hindsight-static and over replan (shardgym/suite_rliable.py).
Every figure is written as PNG (200 dpi), PDF and SVG; agents keep the colours of
shardgym/report_style.py.

    python -m shardgym.suite_report runs/suite.json --out report-suite

`shardgym report` draws it too when given such a JSON next to trace folders. The JSON is read
as data only (json.load); a file that is not a suite's is refused with the reason.
"""
import argparse
import html
import json
import pathlib
import sys
from typing import Any, Dict

from shardgym import report_page, suite_rliable
from shardgym import report_style as style

REFERENCES = ("megatron", "hindsight-static", "dynamic-oracle")


class SuiteReportError(Exception):
    """Not a suite JSON, or one without rows."""


def load(path) -> Dict[str, Any]:
    """The suite JSON at `path`, checked for what the figure reads."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise SuiteReportError(f"{path}: not readable as JSON: {e}") from e
    if not isinstance(data, dict) or "suite" not in data or not isinstance(data.get("rows"), list):
        raise SuiteReportError(f"{path}: not a `shardgym suite` JSON (no suite / rows)")
    for row in data["rows"]:
        for key in ("task", "agent", "vs_hindsight", "vs_megatron"):
            if key not in row:
                raise SuiteReportError(f"{path}: a row without {key!r}")
    data["agents_seen"] = list(dict.fromkeys(r["agent"] for r in data["rows"]))
    if not data["rows"]:
        raise SuiteReportError(f"{path}: no rows (a --no-references run? merge it first with "
                               f"`shardgym suite --from-json REFS.json {path} --json`)")
    return data


def figure(data: Dict[str, Any], out: pathlib.Path, stem: str = "suite") -> str:
    """Draws out/stem.png, .pdf and .svg; returns stem."""
    plt = style.plt()
    rows = data["rows"]
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    agents = list(dict.fromkeys(r["agent"] for r in rows))
    fig, ax = plt.subplots(figsize=(max(6.5, 1.8 + 1.3 * len(tasks)), 4.0))
    width = 0.8 / max(1, len(agents))
    for k, agent in enumerate(agents):
        xs, ys, lo, hi = [], [], [], []
        for i, task in enumerate(tasks):
            r = next((r for r in rows if r["task"] == task and r["agent"] == agent), None)
            ci = r and r["vs_hindsight"]
            if not ci or ci.get("point") is None or ci.get("n", 0) == 0:
                continue
            xs.append(i - 0.4 + width * (k + 0.5))
            ys.append(ci["point"])
            lo.append(ci["point"] - ci["low"])
            hi.append(ci["high"] - ci["point"])
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt=style.marker(agent), ms=5, capsize=2.5,
                    color=style.colour(agent), label=agent)
    ax.axhline(1.0, color="black", lw=0.8, ls=":")
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels(tasks, rotation=20, ha="right")
    for i in range(1, len(tasks)):
        ax.axvline(i - 0.5, color="0.85", lw=0.8)
    ax.set_ylabel("throughput / hindsight-static's\n(same instance, geometric mean)")
    ax.grid(axis="x", visible=False)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return style.save(fig, out, stem)


def _ci(c, digits=3):
    if not c or c.get("n", 0) == 0 or c.get("point") is None:
        return "-"
    return (f"{c['point']:.{digits}f} <small>[{c['low']:.{digits}f}, "
            f"{c['high']:.{digits}f}]</small>")


def table_html(data: Dict[str, Any]) -> str:
    """The rows as an HTML table (the numbers `shardgym suite` prints)."""
    def share(r):
        s = r.get("gain_share")
        return "" if r["agent"] in REFERENCES[:2] or s is None else f"{100 * s:.0f} %"

    head = ("<tr><th>task</th><th>agent</th><th>runs</th><th>× megatron</th>"
            "<th>× hindsight-static</th><th>share of oracle gain</th></tr>")
    body = "".join(
        f"<tr><td>{html.escape(r['task'])}</td>"
        f"<td>{style.swatch(r['agent'])}{html.escape(r['agent'])}</td>"
        f"<td>{int(r.get('runs', 0))}</td><td>{_ci(r['vs_megatron'])}</td>"
        f"<td>{_ci(r['vs_hindsight'])}</td><td>{share(r)}</td></tr>"
        for r in data["rows"] + data.get("overall", []))
    return f"<table>{head}{body}</table>"


def pivot_html(data: Dict[str, Any]) -> str:
    """Agents (rows) x tasks (columns, then overall): throughput over hindsight-static's."""
    rows = data["rows"] + data.get("overall", [])
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    agents = list(dict.fromkeys(r["agent"] for r in rows))
    cell = {(r["agent"], r["task"]): r for r in rows}
    head = "<tr><th>agent</th>" + "".join(f"<th>{html.escape(t)}</th>" for t in tasks) + "</tr>"
    body = "".join(
        f"<tr><td>{style.swatch(a)}{html.escape(a)}</td>" + "".join(
            f"<td>{_ci(cell[(a, t)]['vs_hindsight'], 2) if (a, t) in cell else '-'}</td>"
            for t in tasks) + "</tr>" for a in agents)
    return f"<table>{head}{body}</table>"


def section(path, out: pathlib.Path, reps: int = 2000, seed: int = 0) -> str:
    """The HTML section of one suite JSON (figure files written to `out`)."""
    data = load(path)
    slug = "suite-" + "".join(c if c.isalnum() else "-" for c in str(data["suite"]))
    stem = figure(data, out, slug)
    n = len(data.get("test_instances", []))
    tasks = {r["task"] for r in data["rows"]}
    rliable_part = suite_rliable.section(data, out, slug, reps, seed)
    return (f"<section><h2 id='{html.escape(slug)}'>Task suite "
            f"{html.escape(str(data['suite']))}</h2>"
            f"<h3 id='{html.escape(slug)}-tasks'>Per task</h3><div class='row'>"
            + style.figure_html(stem, (
                f"Per task, each agent's throughput over the best static plan in hindsight on "
                f"the same test instance (geometric mean over the {n} unseen test instances, "
                f"95% bootstrap interval over instances, as <code>shardgym suite</code> prints "
                f"them; learners pool their training seeds); the dynamic oracle's point is the "
                f"task's headroom, 1 (dotted) is the best static plan. From "
                f"{html.escape(str(path))}."), wide=len(tasks) > 4)
            + f"<div class='tablebox'>{pivot_html(data)}<p class='caption'>The figure's "
            f"numbers: throughput × hindsight-static's, geometric mean [95% CI]; overall: "
            f"geometric mean over tasks, bootstrap stratified by task.</p><details><summary>"
            f"All of <code>shardgym suite</code>'s table (× megatron, share of the oracle's "
            f"gain)</summary>{table_html(data)}</details></div></div>"
            f"<h3 id='{html.escape(slug)}-rliable'>Over tasks and instances (rliable)</h3>"
            + rliable_part + "</section>")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shardgym.suite_report",
        description="Figures (PNG, PDF, SVG) and tables (HTML) of a `shardgym suite --out` "
                    "JSON.")
    parser.add_argument("json", help="the suite's JSON (merge runs first with --from-json)")
    parser.add_argument("--out", required=True, help="output folder (created)")
    parser.add_argument("--bootstrap-reps", type=int, default=2000,
                        help="bootstrap resamples of the rliable intervals (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        body = section(args.json, out, args.bootstrap_reps, args.seed)
    except SuiteReportError as e:
        print(f"shardgym.suite_report: {e}", file=sys.stderr)
        return 2
    agents = load(args.json)["agents_seen"]
    (out / "index.html").write_text(report_page.page(
        "ShardGym suite", style.key_html(agents), body))
    print(f"wrote {out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
