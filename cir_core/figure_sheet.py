"""The page of a qualitative figure (`cir_core.figures`): its geometry for a paper's column or
text width (`plan`) and its drawing (`draw`), every text at least `MIN_PT` points at that width.

Per query, from the top: a header (the title in bold, then the edit in italics, wrapped to the
width), the rank numbers, then the reference on the left beside one row per method (its label,
its top-k, a score under each), the reference as tall as the rows (no blank under it); then,
optionally, the map of the query's neighbourhood; after the last query, optionally, the legend.
The cell size follows from the width: what is left of it after the reference, the labels and the
gaps, over k. Text is measured with the font matplotlib draws it in, so wrapping is exact.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .figure_map import TARGET_COLOUR, draw_map, map_caption

MIN_PT = 7.0  # the smallest text a camera-ready checker should find
TITLE_PT = 8.0
WIDTHS = {"column": 3.25, "text": 6.75}  # a two-column paper's column and text width, inches
PPI = 300  # thumbnails at this many pixels per inch of the page
LINE = 1.3  # line height, in font sizes
PAD, GAP, ROW_GAP, PANEL_GAP, SEP = 0.03, 0.04, 0.04, 0.14, 0.06  # inches
REF_MAX = 0.5  # the reference (as tall as the rows) takes at most this share of the width
LABEL_MAX = 0.22  # the method labels at most this share (wrapped to it)
GREY = "#444444"  # secondary text: 9.7:1 on white

SAME_COLOUR = "#2166ac"  # the blue of the same-character dot
FAIL_COLOUR = "#d7191c"  # a campaign's figure: people judged the character not preserved


def width_of(spec: str | float | None) -> float:
    """Inches for 'column' (3.25), 'text' (6.75) or a number; InputError for anything else."""
    from .errors import InputError

    if spec is None:
        return WIDTHS["text"]
    if isinstance(spec, str) and spec.strip().lower() in WIDTHS:
        return WIDTHS[spec.strip().lower()]
    try:
        w = float(spec)
    except (TypeError, ValueError):
        raise InputError(f"--width {spec!r}: give 'column' (3.25 in), 'text' (6.75 in) or inches") from None
    if not 1.5 <= w <= 20:
        raise InputError(f"--width {w:g} in: a figure is between 1.5 and 20 inches wide")
    return w


def text_in(s: str, size: float, bold: bool = False, italic: bool = False) -> float:
    """The width of `s` in inches, set in matplotlib's font at `size` points."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    prop = FontProperties(size=size, weight="bold" if bold else "normal", style="italic" if italic else "normal")
    w, _, _ = TextToPath().get_text_width_height_descent(s, prop, ismath=False)
    return w / 72.0


def wrap(s: str, width: float, size: float, bold: bool = False, italic: bool = False, first: float = 0.0) -> list[str]:
    """`s` in lines no wider than `width` inches (the first line `first` inches shorter), breaking
    at spaces, then after hyphens, then anywhere."""
    words = _rejoin_hyphens(s.split())
    lines: list[str] = []
    cur = ""
    for w in words:
        room = width - (first if not lines else 0.0)
        trial = w if not cur else (cur + w if cur.endswith("-") else f"{cur} {w}")
        if not cur or text_in(trial, size, bold, italic) <= room:
            cur = trial
            continue
        lines.append(cur)
        cur = w
    if cur:
        lines.append(cur)
    out = []
    for i, line in enumerate(lines):  # a single word wider than the room: cut it
        room = width - (first if i == 0 else 0.0)
        while text_in(line, size, bold, italic) > room and len(line) > 1:
            n = max(1, int(len(line) * room / max(text_in(line, size, bold, italic), 1e-6)) - 1)
            out.append(line[:n] + "-")
            line = line[n:]
            room = width
        out.append(line)
    return out


def _rejoin_hyphens(words: list[str]) -> list[str]:
    """Words split after their hyphens ('compose-only' -> 'compose-', 'only'), so a label can
    break there."""
    out = []
    for w in words:
        parts = w.split("-")
        out += [p + "-" for p in parts[:-1] if p] + ([parts[-1]] if parts[-1] else [])
    return out


@dataclass
class Geometry:
    """Where everything goes, in inches from the top left of a `width`-wide page."""

    width: float
    k: int
    n_rows: int
    cell: float
    ref_side: float
    label_w: float
    score_fmt: str | None  # '{:.3f}', '{:.2f}', or None: scores left out (cells too narrow for 7 pt)
    with_map: bool = False
    legend: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def line_h(self) -> float:
        return MIN_PT * LINE / 72.0

    @property
    def score_h(self) -> float:
        return self.line_h if self.score_fmt else 0.0

    @property
    def row_h(self) -> float:
        return self.cell + self.score_h

    @property
    def rows_h(self) -> float:
        return self.n_rows * self.row_h + (self.n_rows - 1) * ROW_GAP

    @property
    def grid_x(self) -> float:
        return PAD + self.ref_side + SEP + self.label_w + SEP

    @property
    def map_h(self) -> float:
        return min(0.42 * self.width, 2.6) if self.with_map else 0.0

    def thumb_px(self) -> int:
        """Pixels of a result thumbnail at `PPI`."""
        return int(math.ceil(self.cell * PPI))

    def reference_px(self) -> int:
        return int(math.ceil(self.ref_side * PPI))


def plan(width: float, k: int, labels: Sequence[str], scores: bool = True, with_map: bool = False,
         legend: bool = False, n_rows: int | None = None) -> Geometry:
    """The geometry of a figure `width` inches wide with `k` results per row and `n_rows` rows per
    query (default: one per label)."""
    n = max(n_rows or len(labels), 1)
    k = max(int(k), 1)
    label_w = min(max((text_in(s, MIN_PT, bold=True) for s in labels), default=0.3), LABEL_MAX * width)
    label_w = max(max((text_in(line, MIN_PT, bold=True) for s in labels
                       for line in wrap(s, label_w, MIN_PT, bold=True)), default=0.3), 0.2)
    notes: list[str] = []
    fmt: str | None = None
    for attempt in (("{:.3f}", "0.000"), ("{:.2f}", "0.00"), (None, "")):
        fmt, probe = attempt
        score_h = MIN_PT * LINE / 72.0 if (scores and fmt) else 0.0
        free = width - 2 * PAD - 2 * SEP - label_w - (k - 1) * GAP
        # the reference as tall as the rows: side = n (c + score_h) + (n - 1) ROW_GAP
        cell = (free - n * score_h - (n - 1) * ROW_GAP) / (k + n)
        ref = n * (cell + score_h) + (n - 1) * ROW_GAP
        if ref > REF_MAX * width:
            ref = REF_MAX * width
            cell = (free - ref) / k
        if not scores or fmt is None or text_in(probe, MIN_PT) <= cell + GAP * 0.8:
            break
    if scores and fmt is None:
        notes.append(f"scores left out: at {width:g} in wide the cells are {cell:.2f} in, narrower than a "
                     f"{MIN_PT:g} pt score; fewer results per row (k) or a wider figure brings them back")
    if cell < 0.15:
        from .errors import InputError

        raise InputError(f"{k} results per row do not fit in {width:g} in: each would be {cell:.2f} in wide; "
                         "choose a smaller k or a wider figure")
    return Geometry(width, k, n, cell, ref, label_w, fmt if scores else None, with_map, legend, notes)


def _array(img: Any) -> np.ndarray:
    from PIL import Image

    if isinstance(img, Image.Image):
        return np.asarray(img.convert("RGB"))
    arr = np.asarray(img)
    if arr.dtype != np.uint8:
        arr = np.clip(arr * (255.0 if arr.max() <= 1.0 else 1.0), 0, 255).astype(np.uint8)
    return arr


class Sheet:
    """A figure drawn to a `Geometry`: `panel` for each query, then `legend_line`."""

    def __init__(self, g: Geometry, panels: Sequence[Any], marks: bool, dpi: int = PPI):
        from matplotlib.figure import Figure

        self.g, self.marks = g, marks
        self.headers = [self._header(p) for p in panels]
        self.heights = [len(h) * g.line_h + g.line_h + g.rows_h + (g.map_h + self._caption_h(p) if g.with_map and
                        getattr(p, "map", None) is not None else 0.0) for p, h in zip(panels, self.headers)]
        self.legend_items = self._legend_items(panels) if g.legend else []
        self.legend_lines = self._legend_layout() if self.legend_items else []
        self.height = (PAD + sum(self.heights) + PANEL_GAP * (len(panels) - 1)
                       + (PANEL_GAP * 0.6 + len(self.legend_lines) * g.line_h if self.legend_lines else 0.0) + PAD)
        self.fig = Figure(figsize=(g.width, self.height), dpi=dpi)
        self.fig.patch.set_facecolor("white")

    # -- measuring --------------------------------------------------------------------------------
    def _header(self, p: Any) -> list[tuple[str, str]]:
        """[(style, text)] lines: the bold title, then the italic edit, wrapped to the width."""
        width = self.g.width - 2 * PAD
        title = (p.title or "").strip()
        lead = text_in(title + " ", TITLE_PT, bold=True) if title else 0.0
        text = f"“{p.text}”" if p.text else ""
        lines = wrap(text, width, MIN_PT, italic=True, first=lead) if text else []
        out = [("title+text", lines[0] if lines else "")] if title else []
        rest = lines[1:] if title else lines
        if len(rest) > 8:
            rest = rest[:7] + [rest[7].rstrip("”") + " …”"]
        return out + [("text", line) for line in rest]

    def _caption_h(self, p: Any) -> float:
        return len(wrap(map_caption(p.map), self.g.width - 2 * PAD, MIN_PT)) * self.g.line_h + 0.08

    def _legend_items(self, panels: Sequence[Any]) -> list[tuple[str, str]]:
        cells = [c for p in panels for _, cs in p.rows if not isinstance(cs, str) for c in cs]
        items = []
        if self.marks and any(c.target is not None for c in cells):
            items.append(("target", "ground-truth target"))
        if self.marks and any(c.same_character is not None for c in cells):
            items.append(("same", "same character as the reference"))
        if self.marks and any(c.failed for c in cells):
            items.append(("failed", "judged not the same character"))
        return items

    def _legend_layout(self) -> list[list[tuple[str, str]]]:
        lines: list[list[tuple[str, str]]] = [[]]
        used, room = 0.0, self.g.width - 2 * PAD
        for kind, label in self.legend_items:
            w = 0.16 + text_in(label, MIN_PT) + 0.18
            if lines[-1] and used + w > room:
                lines.append([])
                used = 0.0
            lines[-1].append((kind, label))
            used += w
        return lines

    # -- drawing ----------------------------------------------------------------------------------
    def axes(self, x: float, y_top: float, w: float, h: float, frame: bool = False):
        ax = self.fig.add_axes((x / self.g.width, (self.height - y_top - h) / self.height, w / self.g.width,
                                h / self.height))
        ax.set_xticks([])
        ax.set_yticks([])
        for s in ax.spines.values():
            s.set_visible(frame)
        return ax

    def text(self, x: float, y_top: float, s: str, size: float = MIN_PT, **kw: Any) -> None:
        self.fig.text(x / self.g.width, 1 - y_top / self.height, s, fontsize=size, **kw)

    def image(self, img: Any, x: float, y_top: float, side: float):
        ax = self.axes(x, y_top, side, side)
        arr = _array(img)
        # the pixels as they are (fetched at PPI for this size): no resampling in the PDF
        ax.imshow(arr, interpolation="none" if max(arr.shape[:2]) >= side * PPI * 0.98 else "lanczos")
        ax.set_xlim(-0.5, arr.shape[1] - 0.5)
        ax.set_ylim(arr.shape[0] - 0.5, -0.5)
        return ax

    def draw(self, panels: Sequence[Any], labels: dict[str, str] | None = None) -> Any:
        y = PAD
        for p, header, h in zip(panels, self.headers, self.heights):
            self.panel(p, header, y, labels or {})
            y += h + PANEL_GAP
        if self.legend_lines:
            self.legend(y - PANEL_GAP + PANEL_GAP * 0.6)
        return self.fig

    def panel(self, p: Any, header: list[tuple[str, str]], y: float, labels: dict[str, str]) -> None:
        g = self.g
        line = g.line_h
        for i, (style, s) in enumerate(header):
            top = y + i * line
            if style == "title+text":
                self.text(PAD, top, p.title, TITLE_PT, fontweight="bold", va="top")
                self.text(PAD + text_in(p.title + " ", TITLE_PT, bold=True), top + 0.01, s, style="italic", va="top")
            else:
                self.text(PAD, top, s, style="italic", va="top")
        y += len(header) * line
        for j in range(g.k):
            self.text(g.grid_x + j * (g.cell + GAP) + g.cell / 2, y, str(j + 1), ha="center", va="top", color=GREY)
        y += line
        ax = self.image(p.reference, PAD, y, g.ref_side)
        for s in ax.spines.values():
            s.set_visible(True)
            s.set_color("#444444")
            s.set_linewidth(0.6)
        for r, (label, cells) in enumerate(p.rows):
            self.row(label, cells, y + r * (g.row_h + ROW_GAP))
        y += g.rows_h
        if g.with_map and getattr(p, "map", None) is not None:
            self.map(p, y + 0.04, labels)

    def row(self, label: str, cells: list | str, top: float) -> None:
        """One method's label (wrapped), its results with their marks and scores, or the reason
        it has none."""
        from matplotlib.patches import Circle, Rectangle

        g = self.g
        lines = wrap(label, g.label_w, MIN_PT, bold=True)
        self.text(g.grid_x - SEP, top + g.cell / 2, "\n".join(lines), ha="right", va="center", fontweight="bold",
                  linespacing=1.1)
        if isinstance(cells, str):
            width = g.k * g.cell + (g.k - 1) * GAP
            self.text(g.grid_x, top + g.cell / 2, "\n".join(wrap(cells, width, MIN_PT, italic=True)[:4]),
                      va="center", color=GREY, style="italic")
            return
        for j, c in enumerate(cells):
            x = g.grid_x + j * (g.cell + GAP)
            ax = self.image(c.image, x, top, g.cell)
            hit = self.marks and c.target
            if hit:
                ax.add_patch(Rectangle((0, 0), 1, 1, transform=ax.transAxes, fill=False, edgecolor=TARGET_COLOUR,
                                       linewidth=max(1.6, 3.2 * g.cell / 0.95), clip_on=False))
            if self.marks and c.same_character:
                ax.add_patch(Circle((0.86, 0.86), 0.09, transform=ax.transAxes, facecolor=SAME_COLOUR,
                                    edgecolor="white", linewidth=0.6))
            if self.marks and c.failed:
                ax.add_patch(Rectangle((0, 0), 1, 1, transform=ax.transAxes, fill=False, edgecolor=FAIL_COLOUR,
                                       linewidth=2.0, clip_on=False))
                ax.text(0.14, 0.86, "✗", transform=ax.transAxes, color="white", fontsize=max(MIN_PT, 9 * g.cell / 0.95),
                        fontweight="bold", ha="center", va="center",
                        bbox={"boxstyle": "circle,pad=0.12", "fc": FAIL_COLOUR, "ec": "none"})
            if g.score_fmt and c.score is not None:
                s = g.score_fmt.format(c.score)
                if hit and text_in(s + " ✓", MIN_PT) <= g.cell + GAP * 0.8:
                    s += " ✓"
                self.text(x + g.cell / 2, top + g.cell + 0.01, s, ha="center", va="top",
                          color=TARGET_COLOUR if hit else "#222222")

    def map(self, p: Any, top: float, labels: dict[str, str]) -> None:
        """The query's neighbourhood map under its rows: the axes, the legend at their right, the
        caption under them."""
        g = self.g
        names = list(dict.fromkeys(pt.method for pt in p.map.points if pt.method))
        texts = [labels.get(n, n) for n in names] + ["reference", "a method's query", "ground truth",
                                                   "per-sentence queries"]
        legend_w = min(max(text_in(t, MIN_PT) for t in texts) + 0.32, 0.45 * g.width)
        ax = self.axes(PAD + 0.16, top, g.width - 2 * PAD - 0.16 - legend_w - 0.06, g.map_h - 0.18, frame=True)
        for s in ax.spines.values():
            s.set_color("#888888")
            s.set_linewidth(0.5)
        draw_map(ax, p.map, labels, fontsize=MIN_PT)
        cap = wrap(map_caption(p.map), g.width - 2 * PAD, MIN_PT)
        self.text(PAD, top + g.map_h + 0.02, "\n".join(cap), va="top", color=GREY, linespacing=LINE)

    def legend(self, top: float) -> None:
        """One line (or more, at a narrow width) naming the marks the figure uses."""
        from matplotlib.patches import Circle, Rectangle

        g = self.g
        for i, line in enumerate(self.legend_lines):
            x, y = PAD, top + i * g.line_h
            for kind, label in line:
                ax = self.axes(x, y + 0.01, 0.11, 0.11)
                ax.set_xlim(0, 1)
                ax.set_ylim(0, 1)
                if kind == "target":
                    ax.add_patch(Rectangle((0.08, 0.08), 0.84, 0.84, fill=False, edgecolor=TARGET_COLOUR, linewidth=1.6))
                elif kind == "same":
                    ax.add_patch(Circle((0.5, 0.5), 0.38, facecolor=SAME_COLOUR, edgecolor="none"))
                else:
                    ax.add_patch(Rectangle((0.08, 0.08), 0.84, 0.84, fill=False, edgecolor=FAIL_COLOUR, linewidth=1.6))
                self.text(x + 0.15, y, label, va="top")
                x += 0.16 + text_in(label, MIN_PT) + 0.18
