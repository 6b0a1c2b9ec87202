"""Qualitative figures in the style of the PACT paper's MovieNet figures: for each query, the
edit over the reference, then one row per method (its label) with its top-k; ground-truth
targets framed in green, results showing the reference's character marked with a blue dot.
Camera-ready at a paper's column or text width (`--width column|text|INCHES`): every text at
least 7 pt at that width, thumbnails at 300 ppi, TrueType fonts in the PDF, no blank area
(`cir_core.figure_sheet`); optionally a legend and each query's neighbourhood map.

Two layers:
- `render(panels, ...)`: PIL images / numpy arrays in, a matplotlib figure out (`save` writes PNG
  or PDF by suffix, `to_image` gives a PIL image). No model, no gallery.
- `build_panels(engine, entries, ...)` runs the queries through `cir_core.engine.Engine.compare`;
  `export(...)` writes PNG + PDF + the query-list JSON that regenerates the same figure:

    python -m cir_core.figures --queries q.json --out fig.pdf --out fig.png [--width column] [--legend] [--map]

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
from PIL import Image

from .errors import CIRError, InputError
from .figure_queries import MAX_ENTRIES, MAX_FIELD, PATHS_REFUSED, parse_entries, resolve_image_path  # noqa: F401
from .figure_sheet import PPI, WIDTHS, Geometry, Sheet, plan, width_of  # noqa: F401

if TYPE_CHECKING:
    from .engine import Engine
    from .engine.results import NeighbourhoodMap

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
    map: NeighbourhoodMap | None = None  # the query's neighbourhood (`render(..., maps=True)`)


def render(panels: Sequence[Panel], marks: bool = True, scores: bool = True, width: str | float | None = None,
           legend: bool = False, maps: bool = False, labels: dict[str, str] | None = None, dpi: int = PPI):
    """A matplotlib Figure `width` inches wide ('column': 3.25, 'text': 6.75, the default, or a
    number): one block per panel (the edit over the reference and a row per method), every text
    at least 7 pt; with `legend` a line naming the marks; with `maps` each panel's neighbourhood
    map under it (`labels`: method name -> label for its legend)."""
    if not panels:
        raise InputError("a figure needs at least one query")
    g = layout(panels, width, scores, legend, maps)
    return Sheet(g, panels, marks, dpi).draw(panels, labels)


def layout(panels: Sequence[Panel], width: str | float | None = None, scores: bool = True, legend: bool = False,
           maps: bool = False) -> Geometry:
    """The geometry `render` draws `panels` with (its `notes` say what had to give)."""
    k = max((len(c) for p in panels for _, c in p.rows if not isinstance(c, str)), default=1)
    labels = list(dict.fromkeys(label for p in panels for label, _ in p.rows))
    return plan(width_of(width), k, labels, scores, maps and any(p.map is not None for p in panels), legend,
                n_rows=max((len(p.rows) for p in panels), default=1))


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
    notes: list[str] = field(default_factory=list)  # what the width made give (scores left out)


# -- queries → panels ---------------------------------------------------------------------------

def _reference(engine: Engine, e: dict, image_root: str | Path | None) -> tuple[Any, str, str, Path | None]:
    """(Reference, edit text, its id for a title, the image file it came from) of one entry."""
    if "query_id" in e:
        q, row = engine.view.query(e["query_id"])
        return engine.view.reference_from_row(row), q.text, q.query_id, None
    if "reference" in e:
        return engine.view.reference_from_id(e["reference"]), e["text"], e["reference"], None
    if "upload" in e:  # the app's own, already checked upload (never from a query list)
        return engine.view.reference_from_upload(e["upload"], name=e.get("name")), e["text"], \
            e.get("name") or "upload", Path(e["upload"])
    path = resolve_image_path(e["reference_path"], image_root)  # checked again: never trust a dict
    return engine.view.reference_from_upload(path), e["text"], Path(e["reference_path"]).name, path


def _letter(i: int) -> str:
    """(a), (b), …, (z), (aa), …"""
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(97 + r) + s
    return f"({s})"


def build_panels(engine: Engine, entries: Sequence[dict], methods: Sequence[str], k: int = 5,
                 scoring: str = "cosine", lam: float | None = None, thumb: int = 192,
                 progress_cb: Callable[[int, int], None] | None = None,
                 image_root: str | Path | None = None, reference_px: int | None = None,
                 maps: bool = False, ids: bool = False) -> list[Panel]:
    """Run every entry through `engine.compare` and lay the results out: results at `thumb`
    pixels, the reference at `reference_px` (default `thumb`); titles '(a) · Ivo', with the
    query's id after the letter when `ids`; with `maps` each panel holds its neighbourhood map
    (the progression's steps drawn as a path). `reference_path` entries are read only under
    `image_root` (none: refused)."""
    if not methods:
        raise InputError("choose at least one method")
    panels = []
    for i, e in enumerate(entries):
        if progress_cb:
            progress_cb(i, len(entries))
        ref, text, ident, path = _reference(engine, e, image_root)
        res = engine.compare(ref, text, k=k, scoring=scoring, lam=lam, methods=methods, progression=maps,
                             explained=maps)
        title = _letter(i) + (f" {ident}" if ids else "") + (f" · {ref.character}" if ref.character else "")
        side = reference_px or thumb
        ref_img = _file_image(path, side) if path is not None else engine.view.reference_thumbnail(ref.row, side)
        rows: list[tuple[str, list[Cell] | str]] = []
        for m in res.methods:
            if not m.ok:
                rows.append((m.label, m.error or "unavailable"))
                continue
            rows.append((m.label, [Cell(engine.view.thumbnail(h.row, thumb), h.score, h.is_target,
                                        h.same_character) for h in m.hits]))
        panels.append(Panel(ref_img, res.edit, title, rows, res.map if maps else None))
    if progress_cb:
        progress_cb(len(entries), len(entries))
    return panels


def _file_image(path: Path, side: int) -> Image.Image:
    """An image file (an upload, a listed file) at most `side` pixels on its longer edge."""
    from .engine import MAX_UPLOAD_PIXELS
    from .imageio import load_image

    img = load_image(path, max_pixels=MAX_UPLOAD_PIXELS)
    img.thumbnail((side, side), Image.Resampling.LANCZOS)
    return img


def export(engine: Engine, entries: Sequence[dict], methods: Sequence[str], outputs: Sequence[str | Path],
           k: int = 5, scoring: str = "cosine", lam: float | None = None, marks: bool = True,
           scores: bool = True, progress_cb: Callable[[int, int], None] | None = None,
           image_root: str | Path | None = None, engine_args: Sequence[str] = (),
           width: str | float | None = None, legend: bool = False, maps: bool = False,
           ids: bool = False) -> Exported:
    """Render and write every path in `outputs` (.png/.pdf/.json), `width` inches wide ('column':
    3.25, 'text': 6.75, the default), thumbnails fetched at 300 ppi for that width (`layout`).
    The JSON (`Exported.spec`) regenerates the figure with `python -m cir_core.figures --queries
    it.json` (its `regenerate`: the full line, `regenerate_command`, with `engine_args`):
    image-file references (`upload`, `reference_path`) are copied beside it and named by file
    name only."""
    from .methods import method_label

    for p in outputs:
        if Path(p).suffix.lower() not in (*FORMATS, ".json"):
            raise InputError(f"cannot write {Path(p).name}: outputs are .png, .pdf or .json")
    if not methods:
        raise InputError("choose at least one method")
    inches = width_of(width)
    g = plan(inches, k, [method_label(m) for m in methods], scores, maps, legend)  # the cells' size
    panels = build_panels(engine, entries, methods, k, scoring, lam, thumb=g.thumb_px(), progress_cb=progress_cb,
                          image_root=image_root, reference_px=g.reference_px(), maps=maps, ids=ids)
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
            "lambda": lam, "marks": marks, "scores": scores, "width": inches, "legend": legend,
            "maps": maps, "ids": ids, "backbone": engine.backbone.id, "gallery": engine.view.gallery.name,
            "regenerate": regenerate_command(jsons[0].name if jsons else "THIS.json", engine_args)}
    labels = {m: method_label(m) for m in methods}
    fig = render(panels, marks=marks, scores=scores, width=inches, legend=legend, maps=maps, labels=labels)
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
    return Exported(spec, panels, fig, list(dict.fromkeys(copied)), layout(panels, inches, scores, legend,
                                                                             maps).notes)


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
    ap.add_argument("--width", help="the figure's width: 'column' (3.25 in), 'text' (6.75 in) or inches "
                    "(default: the JSON's, else text); every text is at least 7 pt at that width")
    ap.add_argument("--legend", action="store_true", default=None,
                    help="a line naming the marks (green frame, blue dot) under the figure")
    ap.add_argument("--map", dest="maps", action="store_true", default=None,
                    help="each query's neighbourhood map under its rows (docs/APP.md, 'Why this result')")
    ap.add_argument("--ids", action="store_true", default=None,
                    help="the query ids in the titles after (a), (b), … (internal ids: off by default)")
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
                      scores=not args.no_scores and bool(doc.get("scores", True)), image_root=root,
                      width=args.width if args.width is not None else doc.get("width"),
                      legend=bool(args.legend if args.legend is not None else doc.get("legend", False)),
                      maps=bool(args.maps if args.maps is not None else doc.get("maps", False)),
                      ids=bool(args.ids if args.ids is not None else doc.get("ids", False)))
    except CIRError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for p in args.out:
        print(p)
    for label, cells in (r for p in out.panels for r in p.rows):
        if isinstance(cells, str):
            print(f"note: {label}: {cells}", file=sys.stderr)
    for note in out.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
