"""Figures and tables from recorded traces: `python -m shardgym.report RUN_DIR... --out DIR`
(or `shardgym report`, which runs this module) writes DIR/index.html with PNG figures.

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
  * simulator against live measurements where a sim and a live episode ran the same plans.

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

CI_LEVEL = 0.95  # every band and interval is a 95 % bootstrap interval (as `shardgym compare`)
GIB = 2.0 ** 30


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


def load_traces(files, cli, skip_damaged, problems):
    from shardgym import datasets
    traces = []
    for f in files:
        try:
            if cli:
                vet(f, cli)
            t = datasets.load(str(f))
        except (ReportError, OSError, ValueError, KeyError) as e:
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


# ---- figures -------------------------------------------------------------------------------

def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 11, "axes.titlesize": 12, "figure.dpi": 110,
                         "axes.grid": True, "grid.alpha": 0.3})
    return plt


def _save(fig, out, name):
    fig.savefig(out / name, bbox_inches="tight")
    _plt().close(fig)
    return name


def bootstrap_band(samples, reps, rng):
    """(mean, low, high) per column of `samples` (runs × points): the 95 % percentile interval
    of the mean over runs resampled with replacement. One run: the band is the line itself."""
    samples = np.asarray(samples, dtype=float)
    idx = rng.integers(0, samples.shape[0], size=(reps, samples.shape[0]))
    means = samples[idx].mean(axis=1)
    a = (1 - CI_LEVEL) / 2
    return samples.mean(axis=0), np.quantile(means, a, axis=0), np.quantile(means, 1 - a, axis=0)


def learning_curves(traces, out, name, reps, rng):
    plt = _plt()
    by_agent = collections.defaultdict(list)
    for t in traces:
        if t.episodes:
            by_agent[t.episodes[0]["attrs"].get("agent", t.path.stem)].append(t)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    parts = []
    for agent, ts in sorted(by_agent.items()):
        n = min(len(t.episodes) for t in ts)
        returns = [[float(ep["rewards"].sum()) for ep in t.episodes[:n]] for t in ts]
        mean, lo, hi = bootstrap_band(returns, reps, rng)
        x = np.arange(1, n + 1)
        line, = ax.plot(x, mean, marker="o", label=f"{agent} ({len(ts)} run{'s' * (len(ts) > 1)})")
        if len(ts) > 1:
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.25, linewidth=0)
        parts.append(f"{agent}: {len(ts)} run(s), first {n} episodes")
    lengths = {len(ep["rewards"]) for t in traces for ep in t.episodes}
    each = f"{lengths.pop()} env steps each, " if len(lengths) == 1 else ""
    ax.set_xlabel(f"episode ({each}recorded by `shardgym train`, in order)")
    ax.set_ylabel("episode return (sum of rewards, unitless)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend()
    ax.set_title("Learning curves")
    return _save(fig, out, name), "; ".join(parts)


def _peak(metrics):
    """Peak memory of the fullest rank per step; NaN where no rank reported (a failed step)."""
    m = metrics["peak_memory_bytes"]
    has = ~np.all(np.isnan(m), axis=1)
    out = np.full(len(m), np.nan)
    out[has] = np.nanmax(m[has], axis=1)
    return out


def _chosen(traces, k):
    """(agent, trace, episode): each agent's k-th complete episode over its traces in order
    (episodes without steps have nothing to draw)."""
    eps = collections.OrderedDict()
    for t in traces:
        for ep in t.episodes:
            if len(ep["rewards"]) == 0:
                continue
            eps.setdefault(ep["attrs"].get("agent") or t.path.stem, []).append((t, ep))
    return [(a, *lst[min(k, len(lst) - 1)]) for a, lst in eps.items()]


def _palette(n):
    """n distinct colours: tab20 without its two greys (grey is kept for "other")."""
    tab20 = _plt().get_cmap("tab20").colors
    return [c for i, c in enumerate(tab20) if i not in (14, 15)][:n]


MAX_NAMED = 17  # strategies with a colour of their own; the rest share grey ("other")


def plan_heatmaps(chosen, out, name):
    plt = _plt()
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Patch
    count = collections.Counter()
    names = {}
    for _, t, ep in chosen:
        ids, n = np.unique(ep["plans"], return_counts=True)
        count.update(dict(zip(ids.tolist(), n.tolist())))
        names.update({i: t.strategies[i] if 0 <= i < len(t.strategies) else "not reported"
                      for i in ids.tolist()})
    many = len(count) > MAX_NAMED + 1
    top = [sid for sid, _ in count.most_common(MAX_NAMED if many else len(count))]
    colours = _palette(len(top)) + ([(0.8, 0.8, 0.8)] if many else [])
    cmap = ListedColormap(colours)
    norm = BoundaryNorm(np.arange(len(colours) + 1) - 0.5, len(colours))
    pos = {sid: j for j, sid in enumerate(top)}
    other = len(top)
    fig, axes = plt.subplots(len(chosen), 1, figsize=(10, 1.2 + 2.2 * len(chosen)), squeeze=False)
    for ax, (agent, t, ep) in zip(axes[:, 0], chosen):
        grid = np.vectorize(lambda i: pos.get(i, other))(ep["plans"]).T  # blocks × steps
        n, b = ep["plans"].shape
        ax.imshow(grid, aspect="auto", origin="lower", cmap=cmap, norm=norm,
                  interpolation="nearest", extent=(0.5, n + 0.5, -0.5, b - 0.5))
        ax.set_title(f"{agent}: {ep['name']} of {t.path.name} (seed {ep['attrs'].get('seed')})")
        ax.set_ylabel("block (2i attn,\n2i+1 MLP of layer i)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(False)
    axes[-1, 0].set_xlabel("env step (plan in force after the step)")
    handles = [Patch(color=colours[j], label=names[sid]) for sid, j in pos.items()]
    if many:
        handles.append(Patch(color=colours[-1],
                             label=f"other ({len(count) - len(top)} rarer strategies)"))
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=min(3, len(handles)), title="strategy (most frequent first)")
    return _save(fig, out, name)


LINESTYLES = ("-", "--", "-.", ":")  # agents whose lines coincide stay distinguishable


def time_series(chosen, events, out, name):
    plt = _plt()
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    div, unit = _memory_unit(np.concatenate(
        [np.ravel(ep["metrics"]["peak_memory_bytes"]) for _, _, ep in chosen]))
    for k, (agent, t, ep) in enumerate(chosen):
        m = ep["metrics"]
        x = np.arange(1, len(ep["rewards"]) + 1)
        style = {"label": agent, "linestyle": LINESTYLES[k % len(LINESTYLES)], "linewidth": 1.6,
                 "marker": "o" if len(x) <= 30 else None, "markersize": 3}
        axes[0].plot(x, m["step_latency_s"], **style)
        axes[1].plot(x, _peak(m) / div, **style)
        axes[2].plot(x, m["energy_j"], **style)
    axes[0].set_ylabel("step latency (s)")
    axes[1].set_ylabel(f"peak memory,\nfullest rank ({unit})")
    axes[2].set_ylabel("energy per step (J)")
    axes[2].set_xlabel("env step")
    axes[2].xaxis.get_major_locator().set_params(integer=True)
    for i, (step, label) in enumerate(events):
        for ax in axes:
            ax.axvline(step - 0.5, color="k", linestyle="--", linewidth=1)
        axes[0].annotate(f"E{i + 1}", (step - 0.5, 1.0), xycoords=("data", "axes fraction"),
                         xytext=(0, 3), textcoords="offset points", ha="center", fontsize=9)
    if events:
        axes[0].set_title("scenario events: " + "; ".join(
            f"E{i + 1} from step {s}: {label}" for i, (s, label) in enumerate(events)),
            fontsize=9, pad=16)
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return _save(fig, out, name)


def pareto_front(points):
    """Indices of the points (latency, energy) that no other point beats on both, by latency."""
    front = []
    for i, (x, y) in enumerate(points):
        if not any((x2 <= x and y2 <= y) and (x2 < x or y2 < y) for x2, y2 in points):
            front.append(i)
    return sorted(front, key=lambda i: points[i])


def pareto_plot(traces, out, name):
    plt = _plt()
    steps = collections.OrderedDict()
    for t in traces:
        for ep in t.episodes:
            m = ep["metrics"]
            ok = (m["ok"] != 0) & (m["oom"] == 0)
            lat, en = steps.setdefault(ep["attrs"].get("agent") or t.path.stem, ([], []))
            lat.extend(m["step_latency_s"][ok])
            en.extend(m["energy_j"][ok])
    # Agents at the same point (to 4 significant digits) share one dot and one label.
    merged = collections.OrderedDict()
    for a, (lat, en) in steps.items():
        if lat:
            key = (float(f"{np.mean(lat):.4g}"), float(f"{np.mean(en):.4g}"))
            merged.setdefault(key, []).append(a)
    pts, labels = list(merged), [" = ".join(v) for v in merged.values()]
    front = pareto_front(pts)
    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=40, zorder=3, label="agent")
    ax.scatter([pts[i][0] for i in front], [pts[i][1] for i in front], s=140, zorder=2,
               facecolors="none", edgecolors="r", linewidths=1.5)
    ax.margins(0.2)
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    fx = [pts[front[0]][0]] + [pts[i][0] for i in front] + [x1]
    fy = [y1] + [pts[i][1] for i in front] + [pts[front[-1]][1]]
    ax.plot(fx, fy, "r-", drawstyle="steps-post", zorder=2,
            label="Pareto front (lower is better on both)")
    ax.fill_between(fx, fy, y1, step="post", color="r", alpha=0.06, label="dominated")
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    placed = []
    for label, (x, y) in sorted(zip(labels, pts), key=lambda lp: lp[1]):
        near = sum(abs(x - px) < 0.06 * (x1 - x0) and abs(y - py) < 0.05 * (y1 - y0)
                   for px, py in placed)
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(7, 5 - 14 * near),
                    fontsize=9)
        placed.append((x, y))
    ax.set_xlabel("mean step latency (s)")
    ax.set_ylabel("mean energy per step (J)")
    ax.legend(loc="upper left")
    return _save(fig, out, name), [labels[i] for i in front]


def fidelity(traces, out, name):
    """Live episodes paired with simulator episodes that ran the same plans from the same
    seed: per step, the simulator's latency and peak memory against the live measurement."""
    sims = [(t, ep) for t in traces for ep in t.episodes if ep["attrs"].get("backend") == "sim"]
    pairs = []
    for t in traces:
        for ep in t.episodes:
            if ep["attrs"].get("backend") != "live":
                continue
            for st, sep in sims:
                if (sep["attrs"].get("seed") == ep["attrs"].get("seed")
                        and sep["plans"].shape == ep["plans"].shape
                        and np.array_equal(sep["plans"], ep["plans"])):
                    pairs.append(((t, ep), (st, sep)))
                    break
    if not pairs:
        return None, None
    plt = _plt()
    from matplotlib import ticker
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.2))
    mem = [_peak(e["metrics"]) for p in pairs for _, e in p]
    div, unit = _memory_unit(np.concatenate(mem))
    ratios = []
    for (t, ep), (st, sep) in pairs:
        label = f"{_short(t.path)}:{ep['name']} vs {_short(st.path)}:{sep['name']}"
        lm, sm = ep["metrics"], sep["metrics"]
        ratios.extend(sm["step_latency_s"] / lm["step_latency_s"])
        axes[0].scatter(lm["step_latency_s"], sm["step_latency_s"], s=22, label=label)
        axes[1].scatter(_peak(lm) / div, _peak(sm) / div, s=22, label=label)
    for ax, what, unit_ in ((axes[0], "step latency", "s"), (axes[1], "peak memory", unit)):
        # Same logarithmic range on both axes: a factor off reads the same at any scale.
        values = np.concatenate([c.get_offsets().ravel() for c in ax.collections])
        values = values[np.isfinite(values) & (values > 0)]
        lo, hi = values.min() / 1.5, values.max() * 1.5
        ax.plot([lo, hi], [lo, hi], "k--", linewidth=1, label="simulator = live")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        subs = (1.0, 2.0, 5.0) if hi / lo > 10 else tuple(range(1, 10))
        for axis in (ax.xaxis, ax.yaxis):  # plain numbers at 1, 2, 5 x 10^k (or 1..9 x 10^k)
            axis.set_major_locator(ticker.LogLocator(subs=subs))
            axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xlabel(f"live {what} ({unit_}, log scale)")
        ax.set_ylabel(f"simulator {what} ({unit_}, log scale)")
    axes[0].legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return _save(fig, out, name), (
        f"median simulator / live step latency {np.nanmedian(ratios):.3g}; pairs: " + "; ".join(
            f"{t.path}:{ep['name']} (live) with {st.path}:{sep['name']} (sim)"
            for (t, ep), (st, sep) in pairs))


def _short(path):
    return f"{path.parent.name}/{path.name}"


def _memory_unit(values):
    """(divisor, unit) for a byte array: GiB from 1 GiB up, else MiB."""
    finite = values[np.isfinite(values)]
    return (GIB, "GiB") if finite.size and finite.max() >= GIB else (2.0 ** 20, "MiB")


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
    traces = load_traces(find_traces(run_dirs), cli, skip_damaged, problems)
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
        chosen = _chosen(ts, episode)
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
