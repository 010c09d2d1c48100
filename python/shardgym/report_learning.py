"""Learning curves of `shardgym report` from the DIR/learning.csv files of `shardgym train
--out DIR` (one DIR = one training seed): the greedy evaluation return against env steps and
against wall time, rliable's IQM over seeds with a stratified bootstrap 95 % interval.

learning.csv has one row per update of vectorised training:
    update,training_steps,env_steps,wall_s,eval_return,train_return
env_steps counts every env step the learner caused (training rollouts, its own searches and
the greedy evaluation episodes that pick the policy it keeps), so curves of learners that
search or evaluate more are not flattered; wall_s is seconds since training began;
eval_return the greedy return on a held-out seed after the update; train_return the mean
return of the training episodes ended since the previous row (empty when none ended).

Seeds log their updates at different x: each seed's curve is a step function (an update's
value holds until the next update) read on a common grid that runs from the latest first
update to the end of the shortest run, so every point of the IQM has every seed; the longer
runs' tails are drawn thin, one line per seed.
"""
import math

import numpy as np

from shardgym import report_style as style

FILE = "learning.csv"
HEADER = "update,training_steps,env_steps,wall_s,eval_return,train_return"
COLUMNS = HEADER.split(",")
AXES = (("env_steps", "env steps (rollouts + searches + evaluation episodes)"),
        ("wall_s", "wall time since training began"))
GRID_POINTS = 120


class LearningError(ValueError):
    """A learning.csv that is not one (wrong header, a bad value, x going backwards)."""


def read(path):
    """The columns of a learning.csv as float arrays (train_return NaN where empty), plus
    notes. A last line cut short (a run killed while writing it) is left out with a note;
    any other bad line raises LearningError naming the file and line."""
    try:
        text = open(path, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as e:
        raise LearningError(f"{path}: not readable: {e}") from None
    lines = text.split("\n")
    if lines[0].strip() != HEADER:
        raise LearningError(f"{path}: header is {lines[0].strip()[:80]!r}, expected {HEADER!r}")
    rows, notes = [], []
    body = lines[1:]
    last_cut = bool(body) and body[-1] != ""  # a last line without its newline
    for i, line in enumerate(body):
        if line.strip() == "":
            continue
        fields = line.split(",")
        try:
            if len(fields) != len(COLUMNS):
                raise ValueError(f"{len(fields)} fields, expected {len(COLUMNS)}")
            row = [float(f) for f in fields[:5]] + [float(fields[5]) if fields[5] else math.nan]
            update, training, env, wall, ev, tr = row
            if not all(math.isfinite(v) for v in row[:5]) or (fields[5] and not
                                                                math.isfinite(tr)):
                raise ValueError("a value is not finite")
            if training < 0 or env < training or wall < 0:
                raise ValueError("needs 0 <= training_steps <= env_steps and wall_s >= 0")
            if rows and (env < rows[-1][2] or wall < rows[-1][3]):
                raise ValueError("env_steps or wall_s smaller than on the line before")
        except ValueError as e:
            if last_cut and i == len(body) - 1:
                notes.append(f"{path}: last line cut short (run stopped while writing it); "
                             f"left out")
                break
            raise LearningError(f"{path}:{i + 2}: {e}: {line[:80]!r}") from None
        rows.append(row)
    data = np.array(rows, dtype=float).reshape(-1, len(COLUMNS))
    return {c: data[:, k] for k, c in enumerate(COLUMNS)}, notes


def step_values(x, y, grid):
    """y of the last row with x <= each grid point (the value an update set holds until the
    next one); NaN before the first row."""
    idx = np.searchsorted(x, grid, side="right") - 1
    out = np.full(len(grid), np.nan)
    out[idx >= 0] = np.asarray(y, dtype=float)[idx[idx >= 0]]
    return out


def common_grid(curves, key, points=GRID_POINTS):
    """The grid (from the latest first x to the earliest last x over seeds) and each seed's
    eval_return and train_return on it (seeds x points); None when the runs do not overlap."""
    start = max(c[key][0] for c in curves)
    end = min(c[key][-1] for c in curves)
    if end < start:
        return None
    grid = np.linspace(start, end, points) if end > start else np.array([start])
    ev = np.array([step_values(c[key], c["eval_return"], grid) for c in curves])
    tr = np.array([step_values(c[key], _carried(c["train_return"]), grid) for c in curves])
    return grid, ev, tr


def _carried(y):
    """NaNs (no training episode ended since the row before) replaced by the last value."""
    y = np.asarray(y, dtype=float).copy()
    for i in range(1, len(y)):
        if np.isnan(y[i]):
            y[i] = y[i - 1]
    return y


def _iqm_curve(matrix):
    return style.iqm_per_point(matrix[:, None, :])


def curve(curves, key, reps, seed):
    """(grid, IQM of eval_return over seeds, its 95 % CI (2 x points), IQM of train_return
    (NaN where a seed has none yet)) on the common grid of `key`, or None when the seeds'
    ranges do not overlap. rliable.library.get_interval_estimates with rliable's IQM per point
    (stratified bootstrap over seeds)."""
    grid = common_grid(curves, key)
    if grid is None:
        return None
    x, ev, tr = grid
    point, ci = style.interval_estimates({"a": ev[:, None, :]}, style.iqm_per_point, reps, seed)
    train = np.full(len(x), np.nan)
    have = ~np.any(np.isnan(tr), axis=0)
    if have.any():
        train[have] = _iqm_curve(tr[:, have])
    return x, point["a"], ci["a"], train


def figure(runs, out, stem, reps, seed):
    """runs: {agent: [(label, columns), ...]} (one entry per seed). Draws out/stem.* (two
    panels: against env steps and against wall time); returns (stem, {agent: description})."""
    from matplotlib import ticker
    from rliable import plot_utils
    plt = style.plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    described = {}
    wall_max = max(c["wall_s"][-1] for rs in runs.values() for _, c in rs)
    minutes = wall_max > 600
    for agent, rs in runs.items():
        curves = [c for _, c in rs]
        col = style.colour(agent)
        parts = []
        for ax, (key, _) in zip(axes, AXES):
            scale = 60.0 if key == "wall_s" and minutes else 1.0
            for c in curves:  # each seed, whole run
                ax.plot(c[key] / scale, c["eval_return"], drawstyle="steps-post", color=col,
                        linewidth=0.7, alpha=0.3, zorder=1)
            got = curve(curves, key, reps, seed)
            if got is None:
                parts.append(f"the seeds' {key} ranges do not overlap: no IQM")
                continue
            x, point, ci, train = got
            plot_utils.plot_sample_efficiency_curve(
                x / scale, {agent: point}, {agent: ci}, algorithms=[agent], colors={agent: col},
                ax=ax, xlabel="", ylabel="", labelsize=10, ticklabelsize=9, marker="",
                linewidth=2.0)
            ax.lines[-1].set_linestyle(style.linestyle(agent))
            ax.plot(x / scale, train, color=col, linewidth=1.2, linestyle=":", zorder=2)
            unit = " env steps" if key == "env_steps" else (" min" if minutes else " s")
            digits = 0 if key == "env_steps" else 1
            ends = " / ".join(f"{c[key][-1] / scale:.{digits}f}" for c in curves)
            parts.append(f"runs end at {ends}{unit}, the IQM is drawn to "
                         f"{x[-1] / scale:.{digits}f}{unit}")
        described[agent] = (f"{agent}: {len(rs)} seed(s) ({', '.join(lb for lb, _ in rs)}); "
                            + "; ".join(parts))
    axes[0].xaxis.set_major_formatter(ticker.EngFormatter(sep=""))
    axes[0].set_xlabel(AXES[0][1])
    axes[1].set_xlabel(f"wall time since training began ({'min' if minutes else 's'})")
    for ax in axes:
        ax.set_ylabel("greedy evaluation return")
        ax.grid(True, alpha=0.3)
        style.tidy_axis(ax)
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color=style.colour(a), linewidth=2, linestyle=style.linestyle(a),
                      label=f"{a} ({len(rs)} seed{'s' * (len(rs) > 1)})")
               for a, rs in runs.items()]
    handles += [Line2D([], [], color="0.3", linewidth=2, label="IQM over seeds, 95% CI band"),
                Line2D([], [], color="0.3", linewidth=1.2, linestyle=":",
                       label="training episodes' mean return (IQM)"),
                Line2D([], [], color="0.3", linewidth=0.7, alpha=0.4, label="each seed")]
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.02),
               ncol=min(4, len(handles)), frameon=False)
    return style.save(fig, out, stem), described
