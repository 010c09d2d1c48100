"""The figure and table of a task suite's results (`shardgym suite --out FILE`, docs/suite.md):
per task, each agent's throughput over the best static plan in hindsight with its 95 %
bootstrap interval over test instances, the dynamic oracle's point marking the headroom.

    python -m shardgym.suite_report runs/suite.json --out report-suite

`shardgym report` draws it too when given such a JSON next to trace folders. The JSON is read
as data only (json.load); a file that is not a suite's is refused with the reason.
"""
import argparse
import html
import json
import pathlib
import sys
from typing import Any, Dict, List

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
    if not data["rows"]:
        raise SuiteReportError(f"{path}: no rows (a --no-references run? merge it first with "
                               f"`shardgym suite --from-json REFS.json {path} --json`)")
    return data


def _colours(agents: List[str]) -> Dict[str, Any]:
    """One fixed colour per agent: references grey/black, the others from tab10 in order."""
    import matplotlib
    fixed = {"megatron": "#9a9a9a", "hindsight-static": "#000000", "dynamic-oracle": "#d62728"}
    others = [a for a in agents if a not in fixed]
    tab = matplotlib.colormaps["tab10"]
    palette = [tab(i) for i in range(10) if i != 3]  # red is the oracle's
    return {**fixed, **{a: palette[i % len(palette)] for i, a in enumerate(others)}}


def figure(data: Dict[str, Any], out: pathlib.Path, name: str = "suite") -> List[str]:
    """Draws out/name.png and out/name.svg; returns their file names."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = data["rows"]
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    agents = list(dict.fromkeys(r["agent"] for r in rows))
    colours = _colours(agents)
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(tasks), 4.2))
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
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", ms=5, capsize=3, color=colours[agent],
                    label=agent)
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels(tasks, rotation=20, ha="right")
    ax.set_ylabel("throughput / hindsight-static's (same instance)")
    ax.set_title(f"suite {data['suite']}: {len(data.get('test_instances', []))} unseen test "
                 f"instances per task; 95 % bootstrap intervals")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=2, loc="lower left")
    files = []
    for ext in ("png", "svg"):
        fig.savefig(out / f"{name}.{ext}", bbox_inches="tight", dpi=150)
        files.append(f"{name}.{ext}")
    plt.close(fig)
    return files


def table_html(data: Dict[str, Any]) -> str:
    """The rows as an HTML table (the numbers `shardgym suite` prints)."""
    def ci(c):
        if not c or c.get("n", 0) == 0 or c.get("point") is None:
            return "-"
        return f"{c['point']:.3f} [{c['low']:.3f}, {c['high']:.3f}]"

    def share(r):
        s = r.get("gain_share")
        return "" if r["agent"] in REFERENCES[:2] or s is None else f"{100 * s:.0f} %"

    head = ("<tr><th>task</th><th>agent</th><th>runs</th><th>× megatron</th>"
            "<th>× hindsight-static</th><th>share of oracle gain</th></tr>")
    body = "".join(
        f"<tr><td>{html.escape(r['task'])}</td><td>{html.escape(r['agent'])}</td>"
        f"<td>{int(r.get('runs', 0))}</td><td>{ci(r['vs_megatron'])}</td>"
        f"<td>{ci(r['vs_hindsight'])}</td><td>{share(r)}</td></tr>"
        for r in data["rows"] + data.get("overall", []))
    return f"<table>{head}{body}</table>"


def section(path, out: pathlib.Path) -> str:
    """The HTML section of one suite JSON (figure files written to `out`)."""
    data = load(path)
    slug = "suite-" + "".join(c if c.isalnum() else "-" for c in str(data["suite"]))
    png, svg = figure(data, out, slug)
    return (f"<h2>Task suite {html.escape(str(data['suite']))}</h2>"
            f"<figure><img src='{png}' alt='suite figure'><figcaption>Per task, each agent's "
            f"throughput over the best static plan in hindsight on the same test instance "
            f"(geometric mean, 95 % bootstrap interval over instances; learners pool their "
            f"training seeds); the dynamic oracle's point is the task's headroom. Vector: "
            f"<a href='{svg}'>{svg}</a>. From {html.escape(str(path))}.</figcaption></figure>"
            + table_html(data))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shardgym.suite_report",
        description="Figure (PNG + SVG) and table (HTML) of a `shardgym suite --out` JSON.")
    parser.add_argument("json", help="the suite's JSON (merge runs first with --from-json)")
    parser.add_argument("--out", required=True, help="output folder (created)")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        body = section(args.json, out)
    except SuiteReportError as e:
        print(f"shardgym.suite_report: {e}", file=sys.stderr)
        return 2
    (out / "index.html").write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>ShardGym suite</title></head>"
        f"<body>{body}</body></html>")
    print(f"wrote {out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
