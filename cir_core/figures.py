"""Qualitative figures in the style of the PACT paper's MovieNet figures: for each query, the
reference with its edit text, then one row per method with its top-k; ground-truth targets framed
in green, results showing the reference's character marked with a blue dot.

Two layers:
- `render(panels, ...)`: PIL images / numpy arrays in, a matplotlib figure out (`save` writes PNG
  or PDF by suffix, `to_image` gives a PIL image). No model, no gallery.
- `build_panels(engine, entries, ...)` runs the queries through `cir_core.engine.Engine.compare`;
  `export(...)` writes PNG + PDF + the query-list JSON that regenerates the same figure:

    python -m cir_core.figures --queries q.json --out fig.pdf --out fig.png

`q.json` is the exported JSON, or a bare list of entries. An entry is a world query id
("test-00010"), {"query_id": ...}, {"reference": <gallery item id>, "text": ...}, or
{"reference_path": <image file>, "text": ...}.

Image files (`reference_path`) are read only under an image root the caller names: the command
line's `--image-root` (default: the folder of the --queries file). Without a root (the app) every
`reference_path` is refused with the same message, whether or not the file exists, so a query
list cannot make a server open or probe its files. The app passes its own checked uploads as
`{"upload": path}` entries, which `parse_entries` never produces; `export` copies every such
reference image beside the JSON and names it there by file name, so the JSON regenerates the
figure with that folder as the image root and never holds a server path.
"""
from __future__ import annotations

import json
import shutil
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
from PIL import Image

from .errors import CIRError, InputError
from .figure_queries import MAX_ENTRIES, MAX_FIELD, PATHS_REFUSED, parse_entries, resolve_image_path  # noqa: F401

if TYPE_CHECKING:
    from .engine import Engine

TARGET_COLOUR = "#1a9641"  # the green of the app's ground-truth frame
SAME_COLOUR = "#2166ac"  # the blue of the same-character dot
FAIL_COLOUR = "#d7191c"  # a campaign's figure: people judged the character not preserved
FORMATS = (".png", ".pdf")


@dataclass
class Cell:
    image: Image.Image | np.ndarray
    score: float | None = None
    target: bool | None = None  # None: ground truth unknown
    same_character: bool | None = None  # None: the reference's character is unknown
    failed: bool | None = None  # people judged the character not preserved (a campaign's figure): red cross


@dataclass
class Panel:
    reference: Image.Image | np.ndarray
    text: str
    title: str = ""
    rows: list[tuple[str, list[Cell] | str]] = field(default_factory=list)  # (label, cells | error)


def _array(img: Image.Image | np.ndarray) -> np.ndarray:
    if isinstance(img, Image.Image):
        return np.asarray(img.convert("RGB"))
    arr = np.asarray(img)
    if arr.dtype != np.uint8:
        arr = np.clip(arr * (255.0 if arr.max() <= 1.0 else 1.0), 0, 255).astype(np.uint8)
    return arr


def render(panels: Sequence[Panel], marks: bool = True, scores: bool = True, cell: float = 0.95,
           dpi: int = 200):
    """A matplotlib Figure: one block per panel, reference + edit on the left, a row per method."""
    if not panels:
        raise InputError("a figure needs at least one query")
    sheet = _Sheet(panels, marks, scores, cell, dpi)
    y = sheet.pad
    for p, h in zip(panels, sheet.heights):
        sheet.panel(p, y)
        y += h + 0.25
    return sheet.fig


class _Sheet:
    """The figure's geometry (inches, from the top left) and its drawing steps."""

    def __init__(self, panels: Sequence[Panel], marks: bool, scores: bool, cell: float, dpi: int):
        import matplotlib

        matplotlib.use("Agg", force=False)
        from matplotlib.figure import Figure

        self.marks, self.scores, self.cell = marks, scores, cell
        self.k = max((len(c) for p in panels for _, c in p.rows if not isinstance(c, str)), default=1)
        self.gap, label_w, self.pad = 0.06 * cell, 1.05, 0.12
        self.ref_side = 1.6 * cell
        self.row_h = cell + (0.16 if scores else 0.02)
        self.heights = [self._panel_height(p) for p in panels]
        self.width = self.pad + self.ref_side + 0.18 + label_w + self.k * cell + (self.k - 1) * self.gap + self.pad
        self.height = self.pad + sum(self.heights) + 0.25 * (len(panels) - 1) + self.pad
        self.grid_x = self.pad + self.ref_side + 0.18 + label_w
        self.fig = Figure(figsize=(self.width, self.height), dpi=dpi)
        self.fig.patch.set_facecolor("white")

    def _panel_height(self, p: Panel) -> float:
        n = max(len(p.rows), 1)
        text_lines = len(textwrap.wrap(p.text, 30)) if p.text else 0
        left_h = 0.22 + self.ref_side + 0.05 + 0.13 * min(text_lines, 9)
        return max(0.22 + n * self.row_h + (n - 1) * self.gap, left_h)

    def axes(self, x: float, y_top: float, w: float, h: float):
        ax = self.fig.add_axes((x / self.width, (self.height - y_top - h) / self.height, w / self.width,
                                h / self.height))
        ax.set_xticks([])
        ax.set_yticks([])
        for s in ax.spines.values():
            s.set_visible(False)
        return ax

    def text(self, x: float, y_top: float, s: str, **kw: Any) -> None:
        self.fig.text(x / self.width, 1 - y_top / self.height, s, **kw)

    def panel(self, p: Panel, y: float) -> None:
        """The reference, the edit under it, the rank numbers and a row per method."""
        pad, side = self.pad, self.ref_side
        if p.title:
            self.text(pad, y + 0.02, p.title, fontsize=7.5, fontweight="bold", va="top")
        ax = self.axes(pad, y + 0.22, side, side)
        ax.imshow(_array(p.reference), interpolation="lanczos")
        for s in ax.spines.values():
            s.set_visible(True)
            s.set_color("#444444")
            s.set_linewidth(0.8)
        if p.text:
            lines = textwrap.wrap(p.text, 30)
            if len(lines) > 9:
                lines = lines[:8] + [lines[8][:26] + " …"]
            self.text(pad, y + 0.22 + side + 0.05, "“" + "\n".join(lines) + "”", fontsize=6.2,
                      va="top", style="italic", linespacing=1.25)
        for j in range(self.k):
            self.text(self.grid_x + j * (self.cell + self.gap) + self.cell / 2, y + 0.02, str(j + 1),
                      fontsize=6.5, ha="center", va="top", color="#555555")
        for r, (label, cells) in enumerate(p.rows):
            self.row(label, cells, y + 0.22 + r * (self.row_h + self.gap))

    def row(self, label: str, cells: list | str, top: float) -> None:
        """One method's results (or the reason it has none), with marks and scores."""
        from matplotlib.patches import Circle, Rectangle

        cell, gx = self.cell, self.grid_x
        self.text(gx - 0.08, top + cell / 2, label, fontsize=7.5, ha="right", va="center", fontweight="bold")
        if isinstance(cells, str):
            self.text(gx, top + cell / 2, "\n".join(textwrap.wrap(cells, 24 * max(self.k, 2))),
                      fontsize=6, va="center", color="#888888", style="italic")
            return
        for j, c in enumerate(cells):
            x = gx + j * (cell + self.gap)
            ax = self.axes(x, top, cell, cell)
            ax.imshow(_array(c.image), interpolation="lanczos")
            hit = self.marks and c.target
            if hit:
                ax.add_patch(Rectangle((0, 0), 1, 1, transform=ax.transAxes, fill=False,
                                       edgecolor=TARGET_COLOUR, linewidth=3.2, clip_on=False))
            if self.marks and c.same_character:
                ax.add_patch(Circle((0.88, 0.88), 0.075, transform=ax.transAxes,
                                    facecolor=SAME_COLOUR, edgecolor="white", linewidth=0.8))
            if self.marks and c.failed:
                ax.add_patch(Rectangle((0, 0), 1, 1, transform=ax.transAxes, fill=False,
                                       edgecolor=FAIL_COLOUR, linewidth=2.4, clip_on=False))
                ax.text(0.1, 0.86, "✗", transform=ax.transAxes, color="white", fontsize=9, fontweight="bold",
                        ha="center", va="center", bbox={"boxstyle": "circle,pad=0.15", "fc": FAIL_COLOUR, "ec": "none"})
            if self.scores and c.score is not None:
                self.text(x + cell / 2, top + cell + 0.02, f"{c.score:.3f}" + (" ✓" if hit else ""),
                          fontsize=5.5, ha="center", va="top", color=TARGET_COLOUR if hit else "#333333")


def to_image(fig) -> Image.Image:
    """Rasterise a figure (Agg) to an RGB PIL image."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return Image.fromarray(np.asarray(canvas.buffer_rgba())[..., :3].copy())


def save(fig, path: str | Path) -> Path:
    """Write `fig` as PNG or PDF (TrueType fonts), chosen by the suffix."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise InputError(f"cannot write {path.name}: figures are {' or '.join(FORMATS)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)  # attach a canvas: a bare Figure has none to print with
    # TrueType (Type 42) fonts in the PDF: matplotlib's default Type 3 is what camera-ready
    # checkers (IEEE PDF eXpress, ACM's) commonly reject. The text is laid out at savefig time.
    with matplotlib.rc_context({"pdf.fonttype": 42, "ps.fonttype": 42}):
        fig.savefig(path, dpi=fig.dpi, facecolor="white", metadata=None if path.suffix == ".png" else
                    {"Creator": "cir-workbench cir_core.figures"})
    return path


def regenerate_command(queries: str, engine_args: Sequence[str] = ()) -> str:
    """The shell line that regenerates a figure from its query list, from any folder: run in the
    folder the JSON was saved to (its reference images lie beside it), with this interpreter
    and this repository on the module path. `engine_args`: the settings the figure was made
    with (`cir_core.settings.engine_argv`)."""
    import shlex

    repo = str(Path(__file__).resolve().parent.parent)
    return " ".join([f"PYTHONPATH={shlex.quote(repo)}", shlex.quote(sys.executable), "-m", "cir_core.figures",
                     "--queries", shlex.quote(queries), "--out", "fig.pdf", "--out", "fig.png",
                     *map(shlex.quote, engine_args)])


@dataclass
class Exported:
    spec: dict  # what the .json holds
    panels: list[Panel]
    figure: Any  # the matplotlib Figure
    references: list[Path] = field(default_factory=list)  # image files copied beside the JSON


# -- queries → panels ---------------------------------------------------------------------------

def _reference(engine: Engine, e: dict, image_root: str | Path | None) -> tuple[Any, str, str]:
    """(Reference, edit text, panel title) of one parsed entry."""
    if "query_id" in e:
        q, row = engine.view.query(e["query_id"])
        return engine.view.reference_from_row(row), q.text, q.query_id
    if "reference" in e:
        return engine.view.reference_from_id(e["reference"]), e["text"], e["reference"]
    if "upload" in e:  # the app's own, already checked upload (never from a query list)
        return engine.view.reference_from_upload(e["upload"], name=e.get("name")), e["text"], \
            e.get("name") or "upload"
    path = resolve_image_path(e["reference_path"], image_root)  # checked again: never trust a dict
    return engine.view.reference_from_upload(path), e["text"], Path(e["reference_path"]).name


def build_panels(engine: Engine, entries: Sequence[dict], methods: Sequence[str], k: int = 5,
                 scoring: str = "cosine", lam: float | None = None, thumb: int = 192,
                 progress_cb: Callable[[int, int], None] | None = None,
                 image_root: str | Path | None = None) -> list[Panel]:
    """Run every entry through `engine.compare` (no progression) and lay the results out.
    `reference_path` entries are read only under `image_root` (none: refused)."""
    if not methods:
        raise InputError("choose at least one method")
    panels = []
    for i, e in enumerate(entries):
        if progress_cb:
            progress_cb(i, len(entries))
        ref, text, title = _reference(engine, e, image_root)
        res = engine.compare(ref, text, k=k, scoring=scoring, lam=lam, methods=methods, progression=False)
        if ref.character:
            title += f" · {ref.character}"
        ref_img = ref.image if ref.row is None else engine.view.reference_thumbnail(ref.row, thumb)
        rows: list[tuple[str, list[Cell] | str]] = []
        for m in res.methods:
            if not m.ok:
                rows.append((m.label, m.error or "unavailable"))
                continue
            rows.append((m.label, [Cell(engine.view.thumbnail(h.row, thumb), h.score, h.is_target,
                                        h.same_character) for h in m.hits]))
        panels.append(Panel(ref_img, res.edit, title, rows))
    if progress_cb:
        progress_cb(len(entries), len(entries))
    return panels


def export(engine: Engine, entries: Sequence[dict], methods: Sequence[str], outputs: Sequence[str | Path],
           k: int = 5, scoring: str = "cosine", lam: float | None = None, marks: bool = True,
           scores: bool = True, progress_cb: Callable[[int, int], None] | None = None,
           image_root: str | Path | None = None, engine_args: Sequence[str] = ()) -> Exported:
    """Render and write every path in `outputs` (.png/.pdf/.json). The JSON (`Exported.spec`)
    regenerates the figure with `python -m cir_core.figures --queries it.json` (its
    `regenerate`: the full line, `regenerate_command`, with `engine_args`): image-file
    references (`upload`, `reference_path`) are copied beside it and named by file name only."""
    for p in outputs:
        if Path(p).suffix.lower() not in (*FORMATS, ".json"):
            raise InputError(f"cannot write {Path(p).name}: outputs are .png, .pdf or .json")
    panels = build_panels(engine, entries, methods, k, scoring, lam, progress_cb=progress_cb,
                          image_root=image_root)
    jsons = [Path(p) for p in outputs if Path(p).suffix.lower() == ".json"]
    queries, sources = [], []
    for i, e in enumerate(entries):
        if "upload" in e or "reference_path" in e:
            src = Path(e["upload"]) if "upload" in e else resolve_image_path(e["reference_path"], image_root)
            stem = jsons[0].stem if jsons else "figure"
            name = f"{stem}-ref{i + 1}{src.suffix.lower() or '.png'}"
            queries.append({"reference_path": name, "text": e["text"]})
            sources.append((src, name))
        else:
            queries.append(dict(e))
    spec = {"queries": queries, "methods": list(methods), "k": int(k), "scoring": scoring,
            "lambda": lam, "marks": marks, "scores": scores, "backbone": engine.backbone.id,
            "gallery": engine.view.gallery.name,
            "regenerate": regenerate_command(jsons[0].name if jsons else "THIS.json", engine_args)}
    fig = render(panels, marks=marks, scores=scores)
    copied: list[Path] = []
    for p in outputs:
        p = Path(p)
        if p.suffix.lower() == ".json":
            p.parent.mkdir(parents=True, exist_ok=True)
            for src, name in sources:
                dest = p.parent / name
                if dest.resolve() != src.resolve():
                    shutil.copyfile(src, dest)
                copied.append(dest)
            p.write_text(json.dumps(spec, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        else:
            save(fig, p)
    return Exported(spec, panels, fig, list(dict.fromkeys(copied)))


def main(argv: list[str] | None = None) -> int:
    import argparse

    from .settings import EngineConfig, add_engine_args, apply_offline_default, settings_from

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_engine_args(ap, methods_help="the JSON's, else the app's columns")
    ap.add_argument("--queries", required=True, help="JSON file (the exported one, or a list); '-' = stdin")
    ap.add_argument("--out", action="append", required=True, help="fig.pdf / fig.png / q.json; repeatable")
    ap.add_argument("--k", type=int, help="results per method (default: the JSON's, else 5)")
    ap.add_argument("--scoring", choices=("cosine", "chord"))
    ap.add_argument("--lambda", dest="lam", type=float, help="Chord λ (default: each method's own)")
    ap.add_argument("--no-marks", action="store_true", help="no ground-truth frames / identity dots")
    ap.add_argument("--no-scores", action="store_true")
    ap.add_argument("--image-root", help="folder that 'reference_path' entries are read from (relative "
                    "paths are relative to it; nothing outside it is opened); default: the folder of "
                    "--queries (the current folder for stdin)")
    args = ap.parse_args(argv)
    try:
        cfg = settings_from(EngineConfig, args)
    except CIRError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    apply_offline_default(cfg.uses_hub())
    from .engine import load_engine
    from .methods import shown_methods

    try:
        raw = sys.stdin.read() if args.queries == "-" else Path(args.queries).read_text(encoding="utf-8")
    except OSError as exc:
        print(f"error: cannot read {args.queries}: {exc.strerror}", file=sys.stderr)
        return 2
    try:
        try:
            doc = json.loads(raw) if raw.strip()[:1] in "[{" else None
        except json.JSONDecodeError:
            doc = None  # parse_entries names the JSON error
        root = args.image_root or (Path(args.queries).resolve().parent if args.queries != "-" else Path.cwd())
        entries = parse_entries(doc if doc is not None else raw, image_root=root)
        doc = doc if isinstance(doc, dict) else {}
        methods = list(cfg.methods) if cfg.methods else doc.get("methods") or shown_methods(cfg.methods)
        engine = load_engine(cfg)
        if doc.get("backbone") and doc["backbone"] != engine.backbone.id:
            print(f"warning: the query list was made with backbone {doc['backbone']}, this run uses "
                  f"{engine.backbone.id}", file=sys.stderr)
        out = export(engine, entries, methods, args.out, k=args.k or int(doc.get("k", 5)),
                      scoring=args.scoring or doc.get("scoring", "cosine"),
                      lam=args.lam if args.lam is not None else doc.get("lambda"),
                      marks=not args.no_marks and bool(doc.get("marks", True)),
                      scores=not args.no_scores and bool(doc.get("scores", True)), image_root=root)
    except CIRError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for p in args.out:
        print(p)
    for label, cells in (r for p in out.panels for r in p.rows):
        if isinstance(cells, str):
            print(f"note: {label}: {cells}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
