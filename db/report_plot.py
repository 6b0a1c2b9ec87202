"""Bar chart of a report: identity and edit rates per method x scoring, 95 % CI error bars."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

BARS = (("identity", "identity preserved", "#4C72B0"), ("edit", "edit satisfied", "#DD8452"))


def report_figure(report: dict[str, Any]) -> Any:
    """A matplotlib Figure (Agg, no pyplot: safe on the app's worker threads); one panel at 1,
    one at k. A method without covered queries gets no bar and an 'n/a' mark."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    if report.get("pairwise"):
        return pairwise_figure(report)
    methods = report["methods"]
    labels = [f"{m['method']}\n{m['scoring']}" for m in methods]
    x = np.arange(len(methods))
    width = 0.38
    fig = Figure(figsize=(max(6.0, 1.1 * len(methods) + 2.0), 7.0), dpi=100)
    axes = fig.subplots(2, 1, sharex=True)
    for ax, depth, title in zip(axes, ("at_1", "at_k"), ("@1", f"@{report['k']}")):
        for i, (metric, name, color) in enumerate(BARS):
            cis = [m[depth][metric] for m in methods]
            mean = np.array([np.nan if c["mean"] is None else c["mean"] for c in cis])
            lo = np.array([np.nan if c["lo"] is None else c["lo"] for c in cis])
            hi = np.array([np.nan if c["hi"] is None else c["hi"] for c in cis])
            ok = ~np.isnan(mean)
            pos = x + (i - 0.5) * width
            ax.bar(pos[ok], mean[ok], width, color=color, label=name,
                   # A percentile interval need not contain the mean; matplotlib rejects negative errors.
                   yerr=np.clip(np.vstack([mean[ok] - lo[ok], hi[ok] - mean[ok]]), 0, None),
                   capsize=3)
            for p in pos[~ok]:
                ax.text(p, 0.02, "n/a", ha="center", va="bottom", fontsize=8, rotation=90)
        cov = ", ".join(str(m["coverage"][depth]) for m in methods)
        ax.set_title(f"{report['query_set']} {title} (queries covered: {cov} of "
                     f"{report['n_queries']})", fontsize=10)
        ax.set_ylim(0.0, 1.2)  # headroom for the legend above the 1.0 bars
        ax.set_yticks(np.linspace(0.0, 1.0, 6))
        ax.set_ylabel("rate (mean over queries)")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(loc="upper center", ncol=2, fontsize=8)
    axes[1].set_xticks(x)
    axes[1].set_xticklabels(labels, fontsize=8)
    fig.tight_layout()
    return fig


def pairwise_figure(report: dict[str, Any]) -> Any:
    """A pairwise set's win rates (X over Y) with 95 % CIs, raw answers and adjudicated labels."""
    from matplotlib.figure import Figure

    pairs = report["pairwise"]["pairs"]
    fig = Figure(figsize=(max(6.0, 1.4 * len(pairs) + 2.0), 4.5), dpi=100)
    ax = fig.subplots()
    x = np.arange(len(pairs))
    for i, (kind, color) in enumerate((("raw", "#4C72B0"), ("adjudicated", "#55A868"))):
        cis = [p[kind]["win_rate"] for p in pairs]
        mean = np.array([np.nan if c["mean"] is None else c["mean"] for c in cis])
        lo = np.array([np.nan if c["lo"] is None else c["lo"] for c in cis])
        hi = np.array([np.nan if c["hi"] is None else c["hi"] for c in cis])
        ok = ~np.isnan(mean)
        ax.bar((x + (i - 0.5) * 0.38)[ok], mean[ok], 0.38, color=color, label=f"win rate, {kind}",
               yerr=np.clip(np.vstack([mean[ok] - lo[ok], hi[ok] - mean[ok]]), 0, None), capsize=3)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{p['x']}\nover\n{p['y']}" for p in pairs], fontsize=7)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("(wins + ½ ties) / answers")
    ax.set_title(f"{report['query_set']}: pairwise win rates (95 % CI over queries)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save_figure(fig: Any, path: str | Path) -> Path:
    """Write the figure (format from the suffix, PNG by default) and return the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)  # attach a canvas: a bare Figure has none to print with
    fig.savefig(out, format=(out.suffix.lstrip(".") or "png"))
    return out
