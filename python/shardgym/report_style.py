"""What every figure of `shardgym report` shares: one colour and marker per agent (the same
agent has the same colour in every figure of every report), matplotlib settings, saving
(PNG at 200 dpi, PDF and SVG beside it), the HTML of a figure, and rliable's statistics
(one IQM everywhere: rliable's, scipy.stats.trim_mean(x, 0.25)).
"""
import contextlib
import hashlib
import html
import warnings

import numpy as np

CI_LEVEL = 0.95  # every interval drawn or printed is a 95 % interval
PNG_DPI = 200
FORMATS = ("png", "pdf", "svg")

# Okabe & Ito's colour-blind-safe colours first, then Paul Tol's: references in black and
# greys, oracles in reds and purples, the adaptive agents in blue, orange and green.
AGENT_COLOURS = {
    "hindsight-static": "#000000",
    "megatron": "#8c8c8c",
    "megatron-sp": "#4d4d4d",
    "static": "#661100",
    "dynamic-oracle": "#D55E00",
    "oracle": "#CC79A7",
    "phase-oracle": "#882255",
    "atp": "#E69F00",
    "replan": "#0072B2",
    "ppo": "#009E73",
    "random": "#56B4E9",
    "greedy": "#332288",
    "random-search": "#999933",
    "anneal": "#AA4499",
    "dp": "#DDCC77",
}
# Names not in the table (new agents) hash into these, which are unlike the table's colours.
FALLBACK_COLOURS = ("#CC6677", "#44AA99", "#117733", "#EE8866", "#BBCC33", "#994455",
                    "#6F4E7C", "#A0522D")
# A variant of a registered agent (its name with options, e.g. ppo(polish=0)) gets a shade
# of that agent's colour, picked by a hash of the whole name: (mix with, amount).
SHADES = (("black", 0.3), ("white", 0.35), ("black", 0.5), ("white", 0.5))
AGENT_MARKERS = {
    "hindsight-static": "s", "megatron": "o", "megatron-sp": "h", "static": "p",
    "dynamic-oracle": "*", "oracle": "P", "phase-oracle": "X", "atp": "^", "replan": "D",
    "ppo": "v", "random": "<", "greedy": ">", "random-search": "d", "anneal": "H", "dp": "8",
}
FALLBACK_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "<", ">", "h", "p", "d")


def _hash(name):
    """A stable small integer of a name (Python's hash() differs between processes)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big")


def base_name(agent):
    """The registered agent a name with options is a variant of: `ppo(polish=0)` -> `ppo`."""
    return agent.split("(", 1)[0].strip()


def colour(agent):
    """The agent's colour, the same in every figure of every report: its entry of
    AGENT_COLOURS; for a variant of a registered agent (ppo(polish=0)) a shade of that agent's
    colour; else one of FALLBACK_COLOURS. Shades and fallbacks are picked by a hash of the name,
    so they do not depend on which other agents a report shows."""
    if agent in AGENT_COLOURS:
        return AGENT_COLOURS[agent]
    base = base_name(agent)
    if base in AGENT_COLOURS:
        from matplotlib import colors
        mix, amount = SHADES[_hash(agent) % len(SHADES)]
        c, m = np.array(colors.to_rgb(AGENT_COLOURS[base])), np.array(colors.to_rgb(mix))
        return colors.to_hex((1 - amount) * c + amount * m)
    return FALLBACK_COLOURS[_hash(agent) % len(FALLBACK_COLOURS)]


def marker(agent):
    if agent in AGENT_MARKERS:
        return AGENT_MARKERS[agent]
    return FALLBACK_MARKERS[_hash(agent) % len(FALLBACK_MARKERS)]


def linestyle(agent):
    """Solid for registered agents, dashed for variants (and names not registered)."""
    return "-" if agent in AGENT_COLOURS else "--"


def colours(agents):
    return {a: colour(a) for a in agents}


def tidy_axis(ax):
    """Thin spines and ticks again after rliable's plotting functions (which thicken them)."""
    for side in ("left", "bottom"):
        ax.spines[side].set_linewidth(0.8)
        ax.spines[side].set_position(("outward", 3))
    ax.tick_params(length=3, width=0.8)


def plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot
    pyplot.rcParams.update({
        "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
        "figure.dpi": 100, "savefig.dpi": PNG_DPI, "axes.grid": True, "grid.alpha": 0.3,
        "axes.spines.top": False, "axes.spines.right": False,
        "svg.fonttype": "none",  # SVG text stays text (searchable, editable)
        "pdf.fonttype": 42,      # TrueType in PDFs (journals refuse Type 3 fonts)
    })
    return pyplot


def save(fig, out, stem):
    """Writes out/stem.png (PNG_DPI), out/stem.pdf and out/stem.svg; returns stem."""
    # The tight bounding box (legends outside the axes included) measured once for the three.
    bbox = fig.get_tightbbox(fig.canvas.get_renderer()).padded(0.05)
    for ext in FORMATS:
        # No dates in the vector files: the same figures give the same bytes.
        meta = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(ext)
        fig.savefig(out / f"{stem}.{ext}", bbox_inches=bbox, metadata=meta)
    plt().close(fig)
    return stem


def figure_html(stem, caption, wide=False):
    """A <figure> of out/stem.png whose caption links the PDF and SVG (vector) versions."""
    s = html.escape(stem)
    links = " ".join(f'<a href="{s}.{e}">{e.upper()}</a>' for e in FORMATS)
    return (f'<figure class="{"wide" if wide else "half"}" id="fig-{s}">'
            f'<a href="{s}.png"><img src="{s}.png" alt="{s}" loading="eager"></a>'
            f'<figcaption>{caption} <span class="files">[{links}]</span></figcaption></figure>')


def swatch(agent):
    """A small square of the agent's colour, to put before its name in HTML tables."""
    return (f'<span class="swatch" style="background:{colour(agent)}" '
            f'title="{html.escape(agent)}"></span>')


def key_html(agents):
    """The agents of a page with their colours (the same in every figure)."""
    return ("<p class='key'>Agent colours (the same in every figure): " + " ".join(
        f"<span class='nowrap'>{swatch(a)}{html.escape(a)}</span>" for a in agents) + "</p>")


# ---- rliable ------------------------------------------------------------------------------

@contextlib.contextmanager
def seeded(seed):
    """rliable's stratified bootstrap draws from numpy's global generator (np.random.choice),
    whatever random_state it is given: seed it for reproducible intervals, then restore it."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():  # arch's notice that random_state is deprecated
            warnings.simplefilter("ignore", FutureWarning)
            yield np.random.RandomState(seed)
    finally:
        np.random.set_state(state)


def iqm(x):
    """rliable's interquartile mean (metrics.aggregate_iqm: scipy.stats.trim_mean(x, 0.25)
    over all runs and tasks): the one IQM of the report."""
    from rliable import metrics
    return float(metrics.aggregate_iqm(np.asarray(x, dtype=float)))


def iqm_per_point(scores):
    """rliable's aggregate_iqm at each point of scores (runs x tasks x points), vectorised:
    the same trim_mean(., 0.25) over runs and tasks, one per point."""
    from scipy import stats
    s = np.asarray(scores, dtype=float)
    return stats.trim_mean(s.reshape(s.shape[0] * s.shape[1], -1), 0.25, axis=0)


def interval_estimates(score_dict, func, reps, seed, task_bootstrap=False):
    """rliable.library.get_interval_estimates at CI_LEVEL, reproducible for a seed."""
    from rliable import library as rly
    with seeded(seed) as rs:
        return rly.get_interval_estimates(score_dict, func, reps=reps,
                                          confidence_interval_size=CI_LEVEL,
                                          task_bootstrap=task_bootstrap, random_state=rs)
