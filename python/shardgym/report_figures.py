"""The figures of `shardgym report` (shardgym/report.py): each function draws one PNG from
loaded traces (shardgym.datasets.Trace with `path`) with matplotlib's Agg backend and returns
its file name; every axis carries its unit.
"""
import collections

import numpy as np

CI_LEVEL = 0.95  # bands are 95 % bootstrap intervals (as `shardgym compare`'s)
GIB = 2.0 ** 30


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
    for label, (x, y) in zip(labels, pts):
        # Among dots close to each other: the lowest labelled below, the highest above, any in
        # between on the left, so that each label sits next to its own dot.
        near = [(px, py) for px, py in pts if (px, py) != (x, y)
                and abs(x - px) < 0.06 * (x1 - x0) and abs(y - py) < 0.06 * (y1 - y0)]
        if near and all(py > y for _, py in near):
            dx, dy, ha = 7, -14, "left"
        elif not near or all(py < y for _, py in near):
            dx, dy, ha = 7, 5, "left"
        else:
            dx, dy, ha = -8, -3, "right"
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(dx, dy), ha=ha,
                    fontsize=9)
    ax.set_xlabel("mean step latency (s)")
    ax.set_ylabel("mean energy per step (J)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3, fontsize=9)
    return _save(fig, out, name), [labels[i] for i in front]


def fidelity(traces, out, name):
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
    plt = _plt()
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
