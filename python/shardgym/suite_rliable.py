"""rliable's view of a task suite (`shardgym suite --out FILE`): per-episode scores, each
episode's throughput over hindsight-static's on the same (task, instance), arranged as rliable
expects them, runs x tasks (runs: test instances x training seeds; tasks: the suite's tasks):
  * performance profiles (library.create_performance_profile): the fraction of an agent's
    episodes scoring above tau, with stratified bootstrap 95 % bands;
  * rliable's IQM of the scores with stratified bootstrap 95 % intervals;
  * probability of improvement (metrics.probability_of_improvement): per task, the chance that
    the agent's score on a random test instance (and training seed) beats the other agent's on
    a random test instance (Mann-Whitney U), averaged over tasks, against hindsight-static
    (whose score is 1 by definition: P > 0.5 means better than the best static plan more
    often than not) and against replan; stratified independent bootstrap 95 % intervals.
Only the tasks every agent has a complete set of episodes for take part (named otherwise).
"""
import collections
import html

import numpy as np

from shardgym import report_style as style

REFERENCE = "hindsight-static"
OPPONENTS = ("hindsight-static", "replan")


def normalised_scores(data):
    """({agent: runs x tasks array}, tasks, instances, notes) from data["episodes"]; an empty
    dict (with the reason in notes) when nothing can be normalised."""
    episodes = data.get("episodes")
    if not isinstance(episodes, list) or not episodes:
        return {}, [], [], ["no per-episode records in the JSON: no profiles or probabilities "
                            "of improvement"]
    notes = []
    ref, eps = {}, collections.defaultdict(dict)  # (task, instance) -> throughput
    failed = collections.Counter()
    for e in episodes:
        try:
            key = (str(e["task"]), int(e["instance"]))
            value = float(e["throughput"])
            agent, seed = str(e["agent"]), int(e.get("training_seed", -1))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"an episode record without task / instance / throughput / "
                             f"agent: {str(e)[:120]}") from None
        if e.get("failed") is True:
            # A failed step ended the episode before the rest of its work: its throughput
            # over the steps it played is no score (the suite's table leaves it out; a
            # profile needs every episode, so it scores 0 here and is counted in the notes).
            failed[agent] += 1
            value = 0.0
        if agent == REFERENCE:
            ref[key] = value
        eps[agent][(key[0], seed, key[1])] = value
    for agent, n in sorted(failed.items()):
        notes.append(f"{agent}: {n} episode{'s' if n != 1 else ''} ended by a failed step, "
                     f"scored 0")
    if not ref:
        return {}, [], [], [f"no {REFERENCE} episodes to normalise by: no profiles or "
                            f"probabilities of improvement"]
    bad = sorted(k for k, v in ref.items() if not (np.isfinite(v) and v > 0))
    if bad:
        notes.append(f"{REFERENCE}'s throughput is not positive on {bad}; those instances "
                     f"left out")
    ref = {k: v for k, v in ref.items() if k not in bad}
    tasks = list(dict.fromkeys(t for t, _ in ref))
    # Instances every task has a reference episode of.
    instances = sorted(set.intersection(*({i for t2, i in ref if t2 == t} for t in tasks)))
    complete = {}
    for agent, got in eps.items():
        seeds = sorted({s for _, s, _ in got})
        complete[agent] = [t for t in tasks if all((t, s, i) in got for s in seeds
                                                    for i in instances)]
    keep = [t for t in tasks if all(t in c for c in complete.values())]
    for t in tasks:
        if t not in keep:
            lacking = [a for a, c in complete.items() if t not in c]
            notes.append(f"task {t} left out: no complete set of episodes of "
                         f"{', '.join(lacking)}")
    missing_ref = sorted({t for (t, _, _) in (k for g in eps.values() for k in g)} - set(tasks))
    if missing_ref:
        notes.append(f"task(s) {', '.join(missing_ref)} left out: no {REFERENCE} episodes")
    if not keep or not instances:
        return {}, [], [], notes + ["no task with every agent's episodes: no profiles"]
    scores = {}
    for agent, got in eps.items():
        seeds = sorted({s for _, s, _ in got})
        scores[agent] = np.array([[got[(t, s, i)] / ref[(t, i)] for t in keep]
                                  for s in seeds for i in instances])
    return scores, keep, instances, notes


def run_score_distribution(scores, taus):
    """rliable's profile (library.score_distributions: the fraction of runs x tasks above
    each tau) in one numpy operation instead of one call per tau."""
    return np.mean(np.asarray(scores)[..., None] > np.asarray(taus), axis=(0, 1))


def probability_of_improvement(scores_x, scores_y):
    """rliable's metrics.probability_of_improvement (per task Mann-Whitney U / (n_x n_y) =
    P(X > Y) + P(X = Y) / 2, averaged over tasks) vectorised: the bootstrap calls it thousands
    of times, scipy's mannwhitneyu per task is ~1 ms a call. The point estimates are rliable's
    own function; test_suite_report checks the two agree."""
    x, y = np.asarray(scores_x)[:, None, :], np.asarray(scores_y)[None, :, :]
    per_task = np.mean(x > y, axis=(0, 1)) + 0.5 * np.mean(x == y, axis=(0, 1))
    return float(np.mean(per_task))


def _order(scores):
    """Agents in the suite's order with the references first."""
    return sorted(scores, key=lambda a: (a != REFERENCE, a not in OPPONENTS, 0))


def estimates(scores, reps, seed):
    """IQM (point, CI), profiles and probabilities of improvement, all from rliable."""
    from rliable import library as rly
    from rliable import metrics
    agents = _order(scores)
    point, ci = style.interval_estimates(
        {a: scores[a] for a in agents}, lambda s: np.array([metrics.aggregate_iqm(s)]),
        reps, seed)
    allv = np.concatenate([s.ravel() for s in scores.values()])
    lo, hi = float(np.min(allv)), float(np.max(allv))
    pad = 0.02 * max(hi - lo, 0.05)
    taus = np.linspace(lo - pad, hi + pad, 101)
    with style.seeded(seed):
        profiles, profile_cis = rly.create_performance_profile(
            {a: scores[a] for a in agents}, taus, custom_profile_func=run_score_distribution,
            reps=reps, confidence_interval_size=style.CI_LEVEL)
    pairs = {f"{a},{b}": (scores[a], scores[b]) for b in OPPONENTS if b in scores
             for a in agents if a != b}
    _, poi_ci = (style.interval_estimates(pairs, probability_of_improvement, reps, seed)
                 if pairs else ({}, {}))
    poi = {k: metrics.probability_of_improvement(*v) for k, v in pairs.items()}
    return {"agents": agents, "iqm": {a: (float(point[a][0]), ci[a][:, 0].tolist())
                                      for a in agents},
            "taus": taus, "profiles": profiles, "profile_cis": profile_cis,
            "poi": {k: (float(v), [float(x) for x in np.ravel(poi_ci[k])]) for k, v in
                    poi.items()}}


def profile_figure(est, scores, out, stem):
    """Performance profiles (left) and the IQM with its interval per agent (right)."""
    from rliable import plot_utils
    plt = style.plt()
    agents = est["agents"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [3, 2]})
    plot_utils.plot_performance_profiles(
        {a: est["profiles"][a] for a in agents}, est["taus"],
        performance_profile_cis={a: est["profile_cis"][a] for a in agents},
        colors=style.colours(agents), linestyles={a: style.linestyle(a) for a in agents},
        ax=ax, alpha=0.15, xlabel="", ylabel="", labelsize=10, ticklabelsize=9)
    ax.axvline(1.0, color="k", linewidth=0.8, linestyle=":")
    ax.set_xlabel(f"normalised throughput τ (agent / {REFERENCE}, same instance)")
    ax.set_ylabel("fraction of episodes with score > τ")
    style.tidy_axis(ax)
    for k, a in enumerate(agents):
        p, (lo, hi) = est["iqm"][a]
        bx.barh(k, hi - lo, left=lo, height=0.6, color=style.colour(a), alpha=0.75)
        bx.plot([p, p], [k - 0.3, k + 0.3], color="k", linewidth=1.5)
    bx.axvline(1.0, color="k", linewidth=0.8, linestyle=":")
    bx.margins(x=0.08)  # points at the extremes stay off the frame
    bx.set_yticks(range(len(agents)))
    bx.set_yticklabels([f"{a} ({len(scores[a])} runs)" for a in agents], fontsize=9)
    bx.tick_params(axis="x", labelsize=9)
    bx.invert_yaxis()
    bx.set_xlabel("IQM of the normalised throughput\n(black: point, bar: 95% CI)")
    bx.grid(axis="y", visible=False)
    from matplotlib.lines import Line2D
    fig.tight_layout()
    fig.legend(handles=[Line2D([], [], color=style.colour(a), linestyle=style.linestyle(a),
                               linewidth=2, label=a) for a in agents],
               loc="upper center", bbox_to_anchor=(0.5, 0.02), ncol=min(6, len(agents)),
               frameon=False)
    return style.save(fig, out, stem)


def poi_figure(est, out, stem):
    """P(agent > opponent) with 95 % intervals, one panel per opponent."""
    plt = style.plt()
    opponents = [b for b in OPPONENTS if any(k.endswith("," + b) for k in est["poi"])]
    agents = est["agents"]
    fig, axes = plt.subplots(1, len(opponents), figsize=(3.6 * len(opponents),
                                                        0.9 + 0.38 * len(agents)),
                             squeeze=False, sharey=True)
    for ax, b in zip(axes[0], opponents):
        for k, a in enumerate(agents):
            if f"{a},{b}" not in est["poi"]:
                continue
            p, (lo, hi) = est["poi"][f"{a},{b}"]
            ax.barh(k, max(hi - lo, 0.004), left=lo, height=0.6, color=style.colour(a),
                    alpha=0.75)
            ax.plot([p, p], [k - 0.3, k + 0.3], color="k", linewidth=1.5)
        ax.axvline(0.5, color="k", linewidth=0.8, linestyle=":")
        ax.set_xlim(-0.03, 1.03)
        ax.set_xlabel(f"P(agent > {b})")
        ax.grid(axis="y", visible=False)
        ax.set_yticks(range(len(agents)))
        ax.set_yticklabels(agents)
    axes[0, 0].invert_yaxis()
    fig.tight_layout()
    return style.save(fig, out, stem)


def section(data, out, slug, reps, seed):
    """The figures and the table of numbers (HTML), or a note saying why there are none."""
    try:
        scores, tasks, instances, notes = normalised_scores(data)
    except ValueError as e:
        return f"<p class='note'>No profiles: {html.escape(str(e))}</p>"
    note_html = "".join(f"<p class='note'>{html.escape(n)}</p>" for n in notes)
    if not scores:
        return note_html
    est = estimates(scores, reps, seed)
    prof = profile_figure(est, scores, out, f"{slug}-profiles")
    poi = poi_figure(est, out, f"{slug}-improvement") if est["poi"] else None
    runs = ", ".join(f"{a} {len(scores[a]) // len(instances)}" for a in est["agents"])
    where = (f"{len(tasks)} task(s) ({html.escape(', '.join(tasks))}) x {len(instances)} test "
             f"instances (x training seeds: {html.escape(runs)})")
    parts = ["<div class='row'>", style.figure_html(prof, (
        f"Left: performance profiles, the fraction of an agent's episodes whose throughput over "
        f"{REFERENCE}'s on the same (task, instance) exceeds τ, with rliable's stratified "
        f"bootstrap 95% bands ({reps} resamples); a curve further right is better, at τ = 1 "
        f"(dotted) the reference. Right: rliable's IQM of the same scores with its 95% "
        f"interval. Over {where}."), wide=True)]
    if poi:
        parts.append(style.figure_html(poi, (
            f"Probability of improvement (rliable): per task, the chance that the agent's score "
            f"on a random test instance beats the other agent's on a random test instance "
            f"(Mann-Whitney), averaged over tasks; bar: stratified independent bootstrap 95% "
            f"interval, black: the estimate; right of 0.5 (dotted) the agent is the better one "
            f"more often than not. Against {REFERENCE}, whose score is 1 on every instance, "
            f"it is the share of episodes above the best static plan (ties count half). "
            f"Over {where}.")))
    head = "".join(f"<th>P(&gt; {b}) [95% CI]</th>" for b in OPPONENTS
                   if any(k.endswith("," + b) for k in est["poi"]))
    rows = []
    for a in est["agents"]:
        p, (lo, hi) = est["iqm"][a]
        cells = [f"{p:.3f} <small>[{lo:.3f}, {hi:.3f}]</small>"]
        for b in OPPONENTS:
            if any(k.endswith("," + b) for k in est["poi"]):
                v = est["poi"].get(f"{a},{b}")
                cells.append("-" if v is None else
                             f"{v[0]:.2f} <small>[{v[1][0]:.2f}, {v[1][1]:.2f}]</small>")
        rows.append(f"<tr><td>{style.swatch(a)}{html.escape(a)}</td>"
                    + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    table = (f"<div class='tablebox'><table><tr><th>agent</th><th>IQM of throughput / "
             f"{REFERENCE} [95% CI]</th>{head}</tr>{''.join(rows)}</table><p class='caption'>"
             f"The figures' numbers (rliable, {reps} bootstrap resamples).</p>{note_html}</div>")
    return "".join(parts) + table + "</div>"
