"""Why a result is where it is, on the page: a result's score terms and ranks in the preview
(`why_text`), and the neighbourhood map as an SVG with a legend (`map_html`), drawn from the
engine's `CompareResult.map` with the colours and caption of `cir_core.figure_map` (which draws
the same map with matplotlib for figures). SVG, not a raster: text stays text, it scales to any
width, and every point names itself (its `<title>`) to a screen reader or a hover."""
from __future__ import annotations

import html
from typing import Any, Mapping

from cir_core.engine.explain import RANK_DEPTH
from cir_core.engine.results import MapPoint, NeighbourhoodMap
from cir_core.figure_map import REFERENCE_COLOUR, TARGET_COLOUR, ink_on, map_caption, method_colours

from .common import dict_in, float_in

W, H = 360, 230  # the SVG's user units: drawn at its column's width (at most 600 px), so that on a
PAD_L, PAD_R, PAD_T, PAD_B = 22, 8, 8, 20  # phone its text is still ~8 px


def why_text(why: Any, scoring: str) -> str:
    """'**Why here:** cosine 0.712 + λ·direction 0.34 × 0.410 = 0.139 → Chord 0.851 · rank 3 under
    cosine, 1 under Chord (this ranking: cosine)'; '' without a breakdown."""
    w = dict_in(why)
    if not w:
        return ""
    num = lambda key: float_in(w.get(key), 0.0, -1e9, 1e9)  # noqa: E731
    rank = lambda key: str(w[key]) if isinstance(w.get(key), int) else f"> {RANK_DEPTH}"  # noqa: E731
    used = "Chord" if str(scoring).lower() == "chord" else "cosine"
    return (f"**Why here:** cosine {num('cosine'):.3f} + λ·direction {num('lam'):.2f} × {num('direction'):.3f} "
            f"= {num('lam_direction'):+.3f} → Chord {num('chord'):.3f} · rank {rank('rank_cosine')} under cosine, "
            f"{rank('rank_chord')} under Chord (this ranking: {used})")


def _point_name(p: MapPoint, labels: Mapping[str, str], ids: Mapping[int, str], targets: set[int]) -> str:
    who = labels.get(p.method or "", p.method or "")
    item = ids.get(p.row, "") if p.row is not None else ""
    gt = " · ground truth" if p.row in targets else ""
    if p.kind == "reference":
        return f"the reference {item}".strip()
    if p.kind == "query":
        return f"{who}'s query"
    if p.kind == "step":
        return f"{who}'s query after sentence {p.rank}"
    if p.kind == "target":
        return f"ground truth {item}"
    return f"{who} result #{p.rank}: {item}{gt}"


def map_html(nmap: NeighbourhoodMap | None, labels: Mapping[str, str], ids: Mapping[int, str]) -> str:
    """The map as an accessible SVG (role img, a title and a description; each point titled)
    with an HTML legend under it; '' without a map. `ids`: gallery row -> item id."""
    if nmap is None or not nmap.points:
        return ""
    pts = nmap.points
    xs, ys = [p.x for p in pts], [p.y for p in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    dx, dy = (x1 - x0) or 1.0, (y1 - y0) or 1.0
    x0, x1, y0, y1 = x0 - 0.06 * dx, x1 + 0.06 * dx, y0 - 0.06 * dy, y1 + 0.06 * dy

    def at(p: MapPoint) -> tuple[float, float]:
        return (PAD_L + (p.x - x0) / (x1 - x0) * (W - PAD_L - PAD_R),
                H - PAD_B - (p.y - y0) / (y1 - y0) * (H - PAD_T - PAD_B))

    colours = method_colours(nmap)
    targets = {p.row for p in pts if p.kind == "target"}
    esc = html.escape
    out = []

    def titled(shape: str, p: MapPoint) -> None:
        out.append(f"<g>{shape}<title>{esc(_point_name(p, labels, ids, targets))}</title></g>")

    for p in pts:
        if p.kind == "target":
            x, y = at(p)
            titled(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="7" fill="none" stroke="{TARGET_COLOUR}" stroke-width="2.2"/>', p)
    for name, colour in colours.items():
        for p in (p for p in pts if p.kind == "result" and p.method == name):
            x, y = at(p)
            titled(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.6" fill="{colour}" stroke="#fff" stroke-width="0.8"/>', p)
        steps = [p for p in pts if p.kind == "step" and p.method == name]
        if steps:
            line = " ".join(f"{at(p)[0]:.1f},{at(p)[1]:.1f}" for p in steps)
            out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="1.4" '
                       'stroke-dasharray="4 3"/>')
            for p in steps:
                x, y = at(p)
                titled(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6.5" fill="{colour}" stroke="#fff" stroke-width="1"/>'
                       f'<text x="{x:.1f}" y="{y + 3.3:.1f}" text-anchor="middle" font-size="9.5" '
                       f'fill="{ink_on(colour)}" font-weight="bold">{p.rank}</text>', p)
        for p in (p for p in pts if p.kind == "query" and p.method == name):
            x, y = at(p)
            titled(f'<path d="{_star(x, y, 8)}" fill="{colour}" stroke="#000" stroke-width="0.8"/>', p)
    ref = next((p for p in pts if p.kind == "reference"), None)
    if ref is not None:
        x, y = at(ref)
        titled(f'<rect x="{x - 5:.1f}" y="{y - 5:.1f}" width="10" height="10" fill="{REFERENCE_COLOUR}"/>', ref)
    caption = map_caption(nmap)
    svg = (f'<svg viewBox="0 0 {W} {H}" role="img" aria-labelledby="why-map-title why-map-desc" '
           'class="why-map-svg" xmlns="http://www.w3.org/2000/svg">'
           '<title id="why-map-title">Map of the neighbourhood: the reference, each method\'s query and top-k, '
           'the ground truth</title>'
           f'<desc id="why-map-desc">{esc(caption)}</desc>'
           f'<rect x="{PAD_L}" y="{PAD_T}" width="{W - PAD_L - PAD_R}" height="{H - PAD_T - PAD_B}" '
           'fill="none" stroke="currentColor" stroke-opacity="0.35"/>'
           f'<text x="{(W + PAD_L) / 2:.0f}" y="{H - 6}" text-anchor="middle" font-size="10" fill="currentColor">'
           'first axis</text>'
           f'<text x="11" y="{(H - PAD_B) / 2:.0f}" text-anchor="middle" font-size="10" fill="currentColor" '
           f'transform="rotate(-90 11 {(H - PAD_B) / 2:.0f})">second axis</text>'
           + "".join(out) + "</svg>")
    def swatch(body: str) -> str:
        return f'<svg viewBox="0 0 16 16" width="16" height="16" aria-hidden="true">{body}</svg>'

    ref_box = swatch(f'<rect x="3" y="3" width="10" height="10" fill="{REFERENCE_COLOUR}"/>')
    ring = swatch(f'<circle cx="8" cy="8" r="6" fill="none" stroke="{TARGET_COLOUR}" stroke-width="2"/>')
    legend = [f"<li>{ref_box}reference</li>", f"<li>{ring}ground truth</li>"]
    for name, colour in colours.items():
        star = swatch(f'<path d="{_star(8, 8, 7)}" fill="{colour}" stroke="#000" stroke-width="0.7"/>')
        dot = swatch(f'<circle cx="8" cy="8" r="4" fill="{colour}"/>')
        legend.append(f"<li>{star}{dot}{esc(labels.get(name, name))}: query, top-k</li>")
    if any(p.kind == "step" for p in pts):
        legend.append("<li>numbered, dashed: the per-sentence queries after sentence 1, 2, …</li>")
    return (f'<h3 class="why-map-head">Why these results: the map of the neighbourhood</h3>'
            '<p class="why-map-note">A click on a result gives its score terms: its cosine, Chord\'s '
            'λ·direction term, its rank under each scoring.</p>'
            f'<figure class="why-map">{svg}<ul class="why-legend">{"".join(legend)}</ul>'
            f'<figcaption>{esc(caption)} See docs/APP.md, “Why this result”, for what it can mislead '
            'about.</figcaption></figure>')


def _star(x: float, y: float, r: float) -> str:
    """A five-pointed star's path centred on (x, y) with outer radius r."""
    import math

    pts = []
    for i in range(10):
        rr = r if i % 2 == 0 else r * 0.45
        a = -math.pi / 2 + i * math.pi / 5
        pts.append(f"{x + rr * math.cos(a):.1f},{y + rr * math.sin(a):.1f}")
    return "M" + " L".join(pts) + " Z"
