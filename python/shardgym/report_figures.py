"""The figures of `shardgym report` (shardgym/report.py) drawn from loaded traces
(shardgym.datasets.Trace with `path`): plans, time series, latency-energy Pareto and
simulator fidelity. Each function writes out/STEM.png, .pdf and .svg (report_style.save) and
returns STEM; every axis carries its unit and every agent its colour of report_style.
The learning curves are in report_learning.py (from learning.csv, not from traces).
"""
import collections

import numpy as np

from shardgym import report_style as style
from shardgym.report_style import CI_LEVEL  # noqa: F401 (the level of every interval)

GIB = 2.0 ** 30


def _peak(metrics):
    """Peak memory of the fullest rank per step; NaN where no rank reported (a failed step)."""
    m = metrics["peak_memory_bytes"]
    has = ~np.all(np.isnan(m), axis=1)
    out = np.full(len(m), np.nan)
    out[has] = np.nanmax(m[has], axis=1)
    return out


def good_steps(ep):
    """The steps that did not fail (ok, no out-of-memory, not the recorded error step): the
    rule of `compare --from-traces` (experiments/compare_traces.cpp)."""
    m, n = ep["metrics"], len(ep["rewards"])
    err_step = int(ep["attrs"].get("error_step", -1))
    return (m["ok"][:n] != 0) & (m["oom"][:n] == 0) & (np.arange(n) != err_step)


def chosen_episodes(traces, k):
    """(agent, trace, episode): each agent's k-th complete episode over its traces in order
    (episodes without steps have nothing to draw)."""
    eps = collections.OrderedDict()
    for t in traces:
        for ep in t.episodes:
            if len(ep["rewards"]) == 0:
                continue
            eps.setdefault(ep["attrs"].get("agent") or t.path.stem, []).append((t, ep))
    return [(a, *lst[min(k, len(lst) - 1)]) for a, lst in eps.items()]


MAX_NAMED = 17  # strategies with a colour of their own; the rest share grey ("other")
OTHER = (0.8, 0.8, 0.8)


def _palette(n):
    """n distinct colours: tab20 without its two greys (grey is kept for "other")."""
    tab20 = style.plt().get_cmap("tab20").colors
    return [c for i, c in enumerate(tab20) if i not in (14, 15)][:n]


def _strategy(t, i):
    return t.strategies[i] if 0 <= i < len(t.strategies) else "not reported"


def strategy_colours(chosen_lists):
    """{strategy name: colour} over all the plan figures of one report, the most frequent
    strategies first, so that a strategy has one colour in every experiment's figure; past
    MAX_NAMED strategies the rarer ones are left out (drawn grey, "other")."""
    count = collections.Counter()
    for chosen in chosen_lists:
        for _, t, ep in chosen:
            ids, n = np.unique(ep["plans"], return_counts=True)
            for i, c in zip(ids.tolist(), n.tolist()):
                count[_strategy(t, i)] += c
    top = [s for s, _ in count.most_common(MAX_NAMED if len(count) > MAX_NAMED + 1
                                           else len(count))]
    return dict(zip(top, _palette(len(top))))


def plan_heatmaps(chosen, out, stem, colours=None):
    """The strategy of every block at every step, one panel per (agent, episode)."""
    plt = style.plt()
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Patch
    colours = colours if colours is not None else strategy_colours([chosen])
    used = collections.Counter()
    for _, t, ep in chosen:
        ids, n = np.unique(ep["plans"], return_counts=True)
        for i, c in zip(ids.tolist(), n.tolist()):
            used[_strategy(t, i)] += c
    named = [s for s in colours if s in used]          # the report's order
    others = [s for s in used if s not in colours]
    cols = [colours[s] for s in named] + ([OTHER] if others else [])
    cmap = ListedColormap(cols)
    norm = BoundaryNorm(np.arange(len(cols) + 1) - 0.5, len(cols))
    pos = {s: j for j, s in enumerate(named)}
    fig, axes = plt.subplots(len(chosen), 1, figsize=(8, 0.9 + 1.55 * len(chosen)),
                             squeeze=False, sharex=True)
    for ax, (agent, t, ep) in zip(axes[:, 0], chosen):
        lookup = {i: pos.get(_strategy(t, i), len(named)) for i in np.unique(ep["plans"])}
        grid = np.vectorize(lookup.get)(ep["plans"]).T  # blocks x steps
        n, b = ep["plans"].shape
        ax.imshow(grid, aspect="auto", origin="lower", cmap=cmap, norm=norm,
                  interpolation="nearest", extent=(0.5, n + 0.5, -0.5, b - 0.5))
        ax.set_title(f"{agent}: {ep['name']} of {t.path.name} (seed {ep['attrs'].get('seed')})",
                     loc="left", fontsize=9.5)
        ax.set_ylabel("block")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.grid(False)
    axes[-1, 0].xaxis.get_major_locator().set_params(integer=True)
    axes[-1, 0].set_xlabel("env step (plan in force after the step); blocks: 2i attention, "
                           "2i+1 MLP of layer i")
    handles = [Patch(color=colours[s], label=s) for s in named]
    if others:
        handles.append(Patch(color=OTHER, label=f"other ({len(others)} rarer strategies)"))
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=min(3, len(handles)), title="strategy (same colours in every plan figure)",
               fontsize=8, frameon=False)
    return style.save(fig, out, stem)


LINESTYLES = ("-", "--", "-.", ":")  # agents whose lines coincide stay distinguishable


def time_series(chosen, events, out, stem):
    plt = style.plt()
    fig, axes = plt.subplots(3, 1, figsize=(8, 6.6), sharex=True)
    div, unit = _memory_unit(np.concatenate(
        [np.ravel(ep["metrics"]["peak_memory_bytes"]) for _, _, ep in chosen]))
    for k, (agent, t, ep) in enumerate(chosen):
        m = ep["metrics"]
        x = np.arange(1, len(ep["rewards"]) + 1)
        st = {"label": agent, "color": style.colour(agent),
              "linestyle": LINESTYLES[k % len(LINESTYLES)], "linewidth": 1.6,
              "marker": style.marker(agent) if len(x) <= 30 else None, "markersize": 4}
        axes[0].plot(x, m["step_latency_s"], **st)
        axes[1].plot(x, _peak(m) / div, **st)
        axes[2].plot(x, m["energy_j"], **st)
    axes[0].set_ylabel("step latency (s)")
    axes[1].set_ylabel(f"peak memory,\nfullest rank ({unit})")
    axes[2].set_ylabel("energy per step (J)")
    axes[2].set_xlabel("env step")
    axes[2].xaxis.get_major_locator().set_params(integer=True)
    for i, (step, label) in enumerate(events):
        for ax in axes:
            ax.axvline(step - 0.5, color="k", linestyle="--", linewidth=0.8)
        axes[0].annotate(f"E{i + 1}", (step - 0.5, 1.0), xycoords=("data", "axes fraction"),
                         xytext=(0, 3), textcoords="offset points", ha="center", fontsize=8)
    if events:
        axes[0].set_title("scenario events: " + "; ".join(
            f"E{i + 1} from step {s}: {label}" for i, (s, label) in enumerate(events)),
            fontsize=8.5, pad=14, loc="left")
    fig.tight_layout()
    fig.legend(*axes[0].get_legend_handles_labels(), loc="upper center",
               bbox_to_anchor=(0.5, 0.0), ncol=min(5, len(chosen)), frameon=False)
    return style.save(fig, out, stem)


def pareto_front(points):
    """Indices of the points (latency, energy) that no other point beats on both, by latency."""
    front = []
    for i, (x, y) in enumerate(points):
        if not any((x2 <= x and y2 <= y) and (x2 < x or y2 < y) for x2, y2 in points):
            front.append(i)
    return sorted(front, key=lambda i: points[i])


def pareto_points(traces, reps, seed):
    """{agent: (episodes, (latency, energy), (latency CI, energy CI))}: per episode the mean
    step latency and energy per step over its steps that did not fail; the point is the mean
    over episodes, the intervals rliable's stratified bootstrap 95 % over episodes."""
    per = collections.OrderedDict()
    for t in traces:
        for ep in t.episodes:
            good = good_steps(ep)
            en = ep["metrics"]["energy_j"][:len(good)][good]
            if not good.any() or np.all(np.isnan(en)):
                continue
            lat = ep["metrics"]["step_latency_s"][:len(good)][good]
            per.setdefault(ep["attrs"].get("agent") or t.path.stem, []).append(
                (float(np.mean(lat)), float(np.nanmean(en))))
    scores = {a: np.asarray(v, dtype=float)[:, None, :] for a, v in per.items()}
    if not scores:
        return {}
    point, ci = style.interval_estimates(scores, lambda s: np.mean(s, axis=(0, 1)), reps, seed)
    return {a: (len(per[a]), tuple(point[a]), (tuple(ci[a][:, 0]), tuple(ci[a][:, 1])))
            for a in per}


def _clusters(xy, within=0.03):
    """Groups of points closer than `within` of the data's span on both axes to an earlier
    point of the group (their markers would hide each other)."""
    xy = np.asarray(xy, dtype=float).reshape(-1, 2)
    span = np.ptp(xy, axis=0) if len(xy) else np.ones(2)
    span[span == 0] = 1.0
    group = list(range(len(xy)))
    for i in range(len(xy)):
        for j in range(i):
            if np.all(np.abs(xy[i] - xy[j]) <= within * span):
                group[i] = group[j]
                break
    out = collections.OrderedDict()
    for i, g in enumerate(group):
        out.setdefault(g, []).append(i)
    return list(out.values())


def pareto_plot(traces, out, stem, reps=2000, seed=0):
    """Mean step latency against mean energy per step, one marker per agent with its 95 %
    intervals over episodes as error bars, the Pareto front of the points; agents named in
    the legend, not on the plot. Markers that would hide each other move apart, a leader line
    to their exact point. Returns (stem, front, close): the agents on the front and the
    groups of agents (nearly) at the same point; stem None when no episode has a step that
    did not fail with its energy measured."""
    pts = pareto_points(traces, reps, seed)
    if not pts:
        return None, [], []
    plt = style.plt()
    agents = list(pts)
    xy = [pts[a][1] for a in agents]
    close = _clusters(xy)
    # A marker of a group that would hide each other moves out on a circle around the group's
    # first point (in points, whatever the scale), a leader line to the exact point (black dot).
    shift = {}
    for g in close:
        for k, i in enumerate(g):
            angle = np.pi / 2 + 2 * np.pi * k / len(g)
            shift[i] = (0.0, 0.0) if len(g) == 1 else (18 * np.cos(angle), 18 * np.sin(angle))
    front = pareto_front(xy)
    fig, ax = plt.subplots(figsize=(7.0, 4.4))
    from matplotlib import transforms
    for i, (a, (x, y)) in enumerate(zip(agents, xy)):
        n, _, ((xlo, xhi), (ylo, yhi)) = pts[a]
        c = style.colour(a)
        ax.errorbar(x, y, xerr=[[x - xlo], [xhi - x]], yerr=[[y - ylo], [yhi - y]], fmt="none",
                    ecolor=c, capsize=3, elinewidth=1.2, zorder=3)
        dx, dy = shift[i]
        moved = transforms.offset_copy(ax.transData, fig=fig, x=dx, y=dy, units="points")
        if dx or dy:
            ax.annotate("", (x, y), xytext=(dx, dy), textcoords="offset points", zorder=4,
                        arrowprops={"arrowstyle": "-", "color": c, "linewidth": 0.9,
                                    "shrinkA": 4, "shrinkB": 0})
            ax.plot(x, y, "k.", ms=3, zorder=6)
        ax.plot(x, y, style.marker(a), color=c, ms=9, mec="white", mew=0.8, zorder=5,
                transform=moved, label=f"{a} ({n} episode{'s' * (n > 1)})")
    ax.margins(0.12)
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    fx = [xy[front[0]][0]] + [xy[i][0] for i in front] + [x1]
    fy = [y1] + [xy[i][1] for i in front] + [xy[front[-1]][1]]
    ax.plot(fx, fy, "k--", linewidth=1, drawstyle="steps-post", zorder=2,
            label="Pareto front (lower is better on both)")
    ax.fill_between(fx, fy, y1, step="post", color="0.5", alpha=0.08, linewidth=0,
                    label="dominated by the front")
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_xlabel("mean step latency (s)")
    ax.set_ylabel("mean energy per step (J)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8.5, frameon=False)
    fig.tight_layout()
    return (style.save(fig, out, stem), [agents[i] for i in front],
            [[agents[i] for i in g] for g in close if len(g) > 1])


def fidelity(traces, out, stem):
    """Live episodes paired with simulator episodes that ran the same plans from the same
    seed: per step, the simulator's latency and peak memory against the live measurement,
    and each repartition's memory in transit (`shardgym validate-sim --traces` writes such
    pairs)."""
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
    plt = style.plt()
    from matplotlib import ticker
    # The repartitions' memory in transit, where both traces record it (newer traces only).
    def moved(lm, sm):
        if "repartition_peak_bytes" not in lm or "repartition_peak_bytes" not in sm:
            return None
        keep = np.isfinite(lm["repartition_peak_bytes"]) & (lm["repartition_peak_bytes"] > 0)
        return lm["repartition_peak_bytes"][keep], sm["repartition_peak_bytes"][keep]
    transit = [moved(ep["metrics"], sep["metrics"]) for (_, ep), (_, sep) in pairs]
    panels = 3 if any(m is not None and m[0].size for m in transit) else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 5.2))
    mem = [_peak(e["metrics"]) for p in pairs for _, e in p]
    div, unit = _memory_unit(np.concatenate(mem))
    ratios = []
    for ((t, ep), (st, sep)), tr in zip(pairs, transit):
        label = f"{_short(t.path)}:{ep['name']} vs {_short(st.path)}:{sep['name']}"
        lm, sm = ep["metrics"], sep["metrics"]
        ratios.extend(sm["step_latency_s"] / lm["step_latency_s"])
        axes[0].scatter(lm["step_latency_s"], sm["step_latency_s"], s=22, label=label)
        axes[1].scatter(_peak(lm) / div, _peak(sm) / div, s=22, label=label)
        if panels == 3 and tr is not None and tr[0].size:
            axes[2].scatter(tr[0] / 2.0 ** 10, tr[1] / 2.0 ** 10, s=22, label=label)
    views = [(axes[0], "step latency", "s"), (axes[1], "peak memory", unit)]
    if panels == 3:
        views.append((axes[2], "repartition memory in transit", "KiB"))
    for ax, what, unit_ in views:
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
        subs = (1.0, 2.0, 5.0) if hi / lo > 5 else tuple(range(1, 10))
        for axis in (ax.xaxis, ax.yaxis):  # plain numbers at 1, 2, 5 x 10^k (or 1..9 x 10^k)
            axis.set_major_locator(ticker.LogLocator(subs=subs))
            axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xlabel(f"live {what} ({unit_}, log scale)")
        ax.set_ylabel(f"simulator {what} ({unit_}, log scale)")
    axes[0].legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return style.save(fig, out, stem), (
        f"median simulator / live step latency {np.nanmedian(ratios):.3g}; pairs: " + "; ".join(
            f"{t.path}:{ep['name']} (live) with {st.path}:{sep['name']} (sim)"
            for (t, ep), (st, sep) in pairs))


def _short(path):
    return f"{path.parent.name}/{path.name}"


def _memory_unit(values):
    """(divisor, unit) for a byte array: GiB from 1 GiB up, else MiB."""
    finite = values[np.isfinite(values)]
    return (GIB, "GiB") if finite.size and finite.max() >= GIB else (2.0 ** 20, "MiB")
