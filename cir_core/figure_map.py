"""The neighbourhood map (`cir_core.engine.explain.neighbourhood_map`) drawn with matplotlib for
figures (`draw_map`), and what every drawing of it shares: the methods' colours and markers, the
caption that says what the axes are (`map_caption`). The app draws the same map as SVG
(`ui/why.py`) with these colours and this caption.

Markers: the reference a black square, ground truth a green ring, each method's query a star in
its colour and its top-k dots in that colour, the progression's per-sentence queries a dashed
path of numbered points.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from .engine.results import NeighbourhoodMap

# Okabe–Ito's colour-blind-safe palette without its green (the ground truth's) and its yellow
# (too light on white); then darker fallbacks for many columns
METHOD_COLOURS = ("#0072B2", "#E69F00", "#CC79A7", "#D55E00", "#56B4E9", "#000000", "#6B4C9A", "#8C564B",
                  "#7F7F7F", "#17BECF", "#BCBD22", "#1F3A93")
REFERENCE_COLOUR = "#222222"
TARGET_COLOUR = "#1a9641"  # the green of the ground-truth frame, in the app, the figures and the map


def method_colours(nmap: NeighbourhoodMap) -> dict[str, str]:
    """Each method of the map (in the order it appears) and its colour."""
    names = list(dict.fromkeys(p.method for p in nmap.points if p.method))
    return {n: METHOD_COLOURS[i % len(METHOD_COLOURS)] for i, n in enumerate(names)}


def ink_on(colour: str) -> str:
    """Black or white, whichever reads better on `colour` ('#rrggbb'): the higher WCAG contrast."""
    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    lum = 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)
    return "#000000" if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else "#ffffff"


def map_caption(nmap: NeighbourhoodMap) -> str:
    """What the axes are, in one sentence (the map's caption in the app and in figures)."""
    return (f"PCA of the {nmap.images} images (reference, results, ground truth): the two axes hold "
            f"{nmap.explained:.0%} of their variance; each query is projected onto them. "
            "Distance in the map is not the score.")


def draw_map(ax: Any, nmap: NeighbourhoodMap, labels: Mapping[str, str], fontsize: float = 7.0,
             legend: bool = True) -> None:
    """The map on a matplotlib Axes (text at `fontsize` points, legend in the axes' upper right
    corner or below it); `labels`: method name -> label."""
    colours = method_colours(nmap)
    pts = nmap.points
    for p in pts:
        if p.kind == "target":
            ax.scatter([p.x], [p.y], s=110, facecolors="none", edgecolors=TARGET_COLOUR, linewidths=1.8, zorder=2)
    for name, colour in colours.items():
        res = [p for p in pts if p.kind == "result" and p.method == name]
        if res:
            ax.scatter([p.x for p in res], [p.y for p in res], s=16, color=colour, edgecolors="white",
                       linewidths=0.4, zorder=3, label=labels.get(name, name))
        steps = [p for p in pts if p.kind == "step" and p.method == name]
        if steps:
            ax.plot([p.x for p in steps], [p.y for p in steps], linestyle="--", linewidth=0.9, color=colour,
                    zorder=4)
            for p in steps:
                ax.annotate(str(p.rank), (p.x, p.y), fontsize=fontsize, ha="center", va="center", color=ink_on(colour),
                            bbox={"boxstyle": "circle,pad=0.15", "fc": colour, "ec": "white", "lw": 0.5},
                            zorder=5)
        for p in (p for p in pts if p.kind == "query" and p.method == name):
            ax.scatter([p.x], [p.y], marker="*", s=120, color=colour, edgecolors="black", linewidths=0.5, zorder=6)
    ref = next((p for p in pts if p.kind == "reference"), None)
    if ref is not None:
        ax.scatter([ref.x], [ref.y], marker="s", s=60, color=REFERENCE_COLOUR, zorder=7)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("first axis", fontsize=fontsize)
    ax.set_ylabel("second axis", fontsize=fontsize)
    if legend:
        from matplotlib.lines import Line2D

        extra = [Line2D([], [], marker="s", color=REFERENCE_COLOUR, linestyle="none", markersize=5, label="reference"),
                 Line2D([], [], marker="*", color="#666666", markeredgecolor="black", linestyle="none",
                        markersize=8, label="a method's query"),
                 Line2D([], [], marker="o", markerfacecolor="none", markeredgecolor=TARGET_COLOUR, linestyle="none",
                        markersize=7, label="ground truth")]
        if any(p.kind == "step" for p in pts):
            extra.append(Line2D([], [], linestyle="--", color="#666666", label="per-sentence queries"))
        handles, _ = ax.get_legend_handles_labels()
        ax.legend(handles=handles + extra, fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  frameon=False, borderaxespad=0.0, handletextpad=0.3, labelspacing=0.35)
