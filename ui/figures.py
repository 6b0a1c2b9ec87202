"""The Figures tab: paper-style qualitative grids (reference + edit, a row per method), exported as
PNG + PDF + the query-list JSON that regenerates them with `python -m cir_core.figures`."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from cir_core.errors import CIRError, InputError
from cir_core.figures import WIDTHS, export, parse_entries, regenerate_command, to_image
from cir_core.methods import method_label, shown_methods, split_baseline
from cir_core.search import DEFAULT_LAMBDA
from cir_core.settings import engine_argv

from .common import EngineHolder, bool_in, choice_in, float_in, int_in, list_in, md_text, text_in, warn
from .settings import AppConfig
from .tempfiles import TEMP
from .uploads import uploaded_path

if TYPE_CHECKING:
    from cir_core.engine import Engine

CURRENT = "The current Compare query"
LISTED = "World query ids or a JSON list"


MAX_LISTED = 50_000  # characters of the query list box


def current_entry(ref_id: str | None, upload: str | None, edit: str | None) -> dict:
    """The Compare tab's query as a figure entry; `upload` must already have passed
    `ui.uploads.uploaded_path` (the app never turns a typed path into an entry)."""
    if not (edit or "").strip():
        raise InputError("The Compare tab has no edit yet: type one there, or list query ids here.")
    if upload:
        return {"upload": str(upload), "name": os.path.basename(str(upload)), "text": edit}
    if (ref_id or "").strip():
        return {"reference": ref_id.strip(), "text": edit}
    raise InputError("The Compare tab has no reference yet: choose one there, or list query ids here.")


@dataclass
class FigureView:
    preview: Any  # PIL image or None
    files: list[str]
    status: str
    error: str | None = None


def export_view(engine: Engine, source: str, listed: str, ref_id: str | None, upload: str | None,
                edit: str | None, methods: list[str], k: int = 5, scoring: str = "cosine",
                own_lambda: bool = True, lam: float = DEFAULT_LAMBDA, marks: bool = True,
                scores: bool = True, out_dir: str | Path | None = None,
                progress_cb: Callable[[int, int], None] | None = None,
                engine_args: list[str] | None = None, width: str = "text", legend: bool = True,
                maps: bool = False, ids: bool = False) -> FigureView:
    """Build the figure and write fig.png, fig.pdf and queries.json under `out_dir` (by default a
    folder of `ui.tempfiles.TEMP`, removed shortly after Gradio has copied the files). A listed
    query may not name an image file (`parse_entries` without an image root refuses it).
    `engine_args`: the app's engine flags, for the regenerate command. `width` 'column' (3.25 in)
    or 'text' (6.75 in); `legend`, `maps` (each query's neighbourhood map), `ids` (query ids in
    the titles): as `cir_core.figures.export`."""
    try:
        entries = [current_entry(ref_id, upload, edit)] if source == CURRENT else parse_entries(listed)
        if len(entries) > 12:
            raise InputError(f"{len(entries)} queries: a figure holds at most 12; split the list.")
        out = Path(out_dir) if out_dir else TEMP.new("cir-figure-")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        paths = [out / f"cir-figure-{stamp}.png", out / f"cir-figure-{stamp}.pdf",
                 out / f"cir-figure-{stamp}-queries.json"]
        sc = "chord" if str(scoring).lower().startswith("chord") else "cosine"
        res = export(engine, entries, list(methods or []), paths, k=int(k), scoring=sc,
                     lam=None if own_lambda else float(lam), marks=marks, scores=scores,
                     progress_cb=progress_cb, engine_args=engine_args or [],
                     width=width if width in WIDTHS else "text", legend=legend, maps=maps, ids=ids)
    except CIRError as exc:
        return FigureView(None, [], f"⚠ {md_text(exc)}", str(exc))
    preview = to_image(res.figure)
    missing = [f"{label}: {cells}" for p in res.panels for label, cells in p.rows if isinstance(cells, str)]
    note = ("\n\nRows without results: " + md_text("; ".join(dict.fromkeys(missing)), 2000)) if missing else ""
    note += "".join(f"\n\nNote: {md_text(n, 1000)}" for n in res.notes)
    n = len(entries)
    cmd = regenerate_command(paths[2].name, engine_args or [])
    status = (f"Exported {n} quer{'y' if n == 1 else 'ies'} × {len(methods)} method"
              f"{'s' * (len(methods) != 1)}, top-{int(k)}, {res.spec['width']:g} in wide (every text ≥ 7 pt, "
              f"thumbnails at 300 ppi). To regenerate it, in the folder you save "
              f"the files to:\n\n```\n{cmd}\n```{note}")
    return FigureView(preview, [str(p) for p in [*paths, *res.references]], status)


def build(holder: EngineHolder, cfg: AppConfig, compare: Any):
    names = shown_methods(cfg.methods)
    argv = engine_argv(cfg)
    columns, baseline = split_baseline(names)
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=320):
            gr.Markdown("### Queries")
            source = gr.Radio([CURRENT, LISTED], value=CURRENT, show_label=False, elem_id="fig-source")
            listed = gr.Textbox(label="Query ids or JSON", lines=4, visible=False, elem_id="fig-queries",
                                placeholder='test-00010, test-00017\nor [{"query_id": "test-00010"}, '
                                            '{"reference": "test/000123", "text": "Make it blue."}]')
            gr.Markdown("### Layout")
            methods = gr.CheckboxGroup([(method_label(n), n) for n in names], value=columns,
                                       label="Methods (one row each)", elem_id="fig-methods")
            k = gr.Slider(1, 10, value=5, step=1, label="Results per method (k)")
            width = gr.Radio([("Paper column, 3.25 in", "column"), ("Paper text width, 6.75 in", "text")],
                             value="text", label="Width (every text ≥ 7 pt at it)", elem_id="fig-width")
            with gr.Row():
                marks = gr.Checkbox(value=True, label="Ground-truth and identity marks")
                scores = gr.Checkbox(value=True, label="Scores under results")
            with gr.Row():
                legend = gr.Checkbox(value=True, label="Legend of the marks", elem_id="fig-legend")
                maps = gr.Checkbox(value=False, label="Each query's neighbourhood map", elem_id="fig-map")
                ids = gr.Checkbox(value=False, label="Query ids in the titles", elem_id="fig-ids")
            gr.Markdown("Scoring and λ follow the Compare tab.", elem_classes="small-note")
            run = gr.Button("Export PNG + PDF + JSON", variant="primary", elem_id="fig-export")
            status = gr.Markdown("", elem_classes="status-msg", elem_id="fig-status")
        with gr.Column(scale=3, min_width=420):
            preview = gr.Image(label="Preview", interactive=False, height=560, elem_id="fig-preview",
                               buttons=["download", "fullscreen"])
            files = gr.File(label="Files", file_count="multiple", interactive=False, elem_id="fig-files")

    source.change(lambda s: gr.update(visible=s == LISTED), [source], [listed], api_visibility="private")

    def on_export(src, lst, ref, up, text, meth, kk, sc, own, lm, mk, scs, wd="text", lg=True, mp=False, ids_=False,
                  progress=gr.Progress()):
        try:
            engine = holder.get(progress)
            path = uploaded_path(up) if src == CURRENT else None
        except CIRError as exc:
            warn(str(exc))
            return None, None, f"⚠ {md_text(exc)}"

        def cb(done: int, total: int) -> None:
            progress((done, total), desc="Retrieving and drawing", unit="queries")

        chosen = [m for m in list_in(meth, 50) if isinstance(m, str) and m in names]
        view = export_view(engine, choice_in(src, (CURRENT, LISTED), CURRENT), text_in(lst, MAX_LISTED),
                           text_in(ref, 500), path, text_in(text, 20_000), chosen, int_in(kk, 5, 1, 10),
                           text_in(sc, 20), bool_in(own, True), float_in(lm, DEFAULT_LAMBDA, 0.0, 1.0),
                           bool_in(mk, True), bool_in(scs, True), progress_cb=cb, engine_args=argv,
                           width=choice_in(wd, tuple(WIDTHS), "text"), legend=bool_in(lg, True),
                           maps=bool_in(mp, False), ids=bool_in(ids_, False))
        if view.error:
            warn(view.error)
        return view.preview, view.files or None, view.status

    # The status is cleared first, in the browser (a JS-only step), and the progress bar is drawn
    # on the preview only: it never sits over the previous run's warning.
    run.click(None, None, [status], js="() => ''", api_visibility="private").then(
        on_export, [source, listed, compare.ref_id, compare.upload, compare.edit, methods, k,
                    compare.scoring, compare.own_lambda, compare.lam, marks, scores, width, legend, maps, ids],
        [preview, files, status], api_name="export_figure", show_progress_on=[preview])

    def load(engine: Engine) -> list:
        avail = set(engine.methods.available())
        choices = [(method_label(n) + ("" if n in avail else " (unavailable)"), n) for n in names]
        value = [n for n in names if n in avail and n != baseline] or [n for n in names if n in avail]
        return [gr.update(choices=choices, value=value)]

    return [methods], load
