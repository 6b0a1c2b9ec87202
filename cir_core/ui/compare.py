"""The Compare tab: choose a reference (gallery page, upload, example query), type an edit, see every
method's top-k side by side and the per-sentence progression.

The handlers are plain functions of the engine (`page_view`, `select_from_page`, `upload_view`,
`compare_view`, ...) that return values; `build` only lays out components and wires them, so
tests call the handlers directly. Errors become messages (a toast and a line in the tab), never a
stack trace.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import gradio as gr
from gradio.data_classes import FileData

from cir_core.appconfig import AppConfig
from cir_core.engine import MAX_K, MAX_STEPS, MAX_TEXT_CHARS, CompareResult, method_label
from cir_core.errors import CIRError
from cir_core.scoring import DEFAULT_LAMBDA

from .common import LEGEND, THUMB, EngineHolder, fmt_ms, gallery_items

log = logging.getLogger(__name__)

PAGE_SIZE = 24
PICK_THUMB = 128
NO_REFERENCE = "Choose a reference first: click a gallery image, upload one, or pick an example query."


# -- reference ----------------------------------------------------------------------------------

def page_view(engine: Any, search: str, page: int) -> tuple[list, str, list[int], int]:
    """One page of the reference browser: (thumbnails, label, rows shown, page clamped)."""
    rows = engine.search(search or "")
    pages = max(1, math.ceil(len(rows) / PAGE_SIZE))
    page = min(max(int(page or 0), 0), pages - 1)
    shown = rows[page * PAGE_SIZE:(page + 1) * PAGE_SIZE]
    items = [engine.thumbnail(r, PICK_THUMB) for r in shown]  # ids in the box once picked
    if rows:
        label = (f"{page * PAGE_SIZE + 1:,}–{page * PAGE_SIZE + len(shown):,} of {len(rows):,} images"
                 + (f" matching “{search.strip()}”" if (search or "").strip() else "")
                 + f" · page {page + 1}/{pages}")
    else:
        label = f"No image matches “{(search or '').strip()}”. Search by id (test/000123), a character " \
                "name or caption words (blue star beach)."
    return items, label, shown, page


def reference_info(engine: Any, ref: Any) -> str:
    if ref.row is None:
        w, h = ref.image.size if ref.image is not None else (0, 0)
        return (f"**{ref.label}** · encoded in {fmt_ms(ref.encode_ms)}\n\n"
                "Character unknown (uploaded image): no identity or ground-truth marks.")
    who = f" · character **{ref.character}**" if ref.character else ""
    cap = engine.caption(ref.row)
    return f"**{ref.item_id}**{who}" + (f"\n\n<small>{cap}</small>" if cap else "")


def reference_view(engine: Any, ref_id: str) -> tuple[Any, str]:
    """(preview image, info markdown) for gallery item `ref_id`; raises InputError if unknown."""
    ref = engine.reference_from_id(ref_id)
    return engine.thumbnail(ref.row, 256), reference_info(engine, ref)


def select_from_page(engine: Any, rows: list[int], index: int) -> tuple[str, Any, str]:
    """A click on thumbnail `index` of the current page: (reference id, preview, info)."""
    if not rows or not 0 <= int(index) < len(rows):
        raise CIRError("That thumbnail is no longer on this page; pick again.")
    ref_id = engine.item_id(rows[int(index)])
    return (ref_id, *reference_view(engine, ref_id))


def upload_view(engine: Any, path: str | None) -> tuple[Any, str]:
    """Validate and encode an upload now (so errors show at once): (preview, info)."""
    ref = engine.reference_from_upload(path)
    return ref.image, reference_info(engine, ref)


def example_items(engine: Any) -> tuple[list, list[str]]:
    items, ids = [], []
    for q in engine.example_queries():
        _, row = engine.query(q.query_id)
        text = q.text if len(q.text) <= 70 else q.text[:68] + "…"
        items.append((engine.thumbnail(row, PICK_THUMB), f"{q.query_id} · {text}"))
        ids.append(q.query_id)
    return items, ids


def select_example(engine: Any, ids: list[str], index: int) -> tuple[str, str, Any, str]:
    """(reference id, edit text, preview, info) of example query number `index`."""
    q, row = engine.query(ids[int(index)])
    ref_id = engine.item_id(row)
    return (ref_id, q.text, *reference_view(engine, ref_id))


def resolve_reference(engine: Any, ref_id: str | None, upload: str | None) -> Any:
    """An upload wins (choosing a gallery image clears it); else the gallery id."""
    if upload:
        return engine.reference_from_upload(upload)
    if ref_id and str(ref_id).strip():
        return engine.reference_from_id(ref_id)
    raise CIRError(NO_REFERENCE)


# -- compare ------------------------------------------------------------------------------------

@dataclass
class CompareView:
    """Everything the Compare tab shows after a request, as plain values."""

    status: str
    timings: str = ""
    columns: list[tuple[str, list]] = field(default_factory=list)  # (header markdown, items)
    progression_header: str = ""
    steps: list[tuple[str, list]] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    error: str | None = None


def column_header(m: Any, scoring: str) -> str:
    if not m.ok:
        return f"**{m.label}**\n\n<span class='col-err'>⚠ {m.error}</span>"
    lam = f" · λ {m.lam:.2f}" if scoring == "chord" and m.lam is not None else ""
    return f"**{m.label}**{lam}\n\ncompose {fmt_ms(m.compose_ms)} · search {fmt_ms(m.search_ms)}"


def empty_headers(names: list[str]) -> list[tuple[str, list]]:
    return [(f"**{method_label(n)}**\n\n&nbsp;", []) for n in names]


def compare_view(engine: Any, ref_id: str | None, upload: str | None, edit: str | None, k: int = 8,
                 scoring: str = "cosine", own_lambda: bool = True, lam: float = DEFAULT_LAMBDA,
                 names: list[str] | None = None) -> CompareView:
    """Run one Compare request and render it to values; every user error becomes `status`."""
    import time

    names = list(names) if names is not None else engine.default_methods()
    scoring = "chord" if str(scoring).lower().startswith("chord") else "cosine"
    try:
        engine.check_edit(edit)  # an empty edit is reported before an upload is encoded
        ref = resolve_reference(engine, ref_id, upload)
        res = engine.compare(ref, edit or "", k=int(k), scoring=scoring,
                             lam=None if own_lambda else float(lam), methods=names)
    except CIRError as exc:
        return CompareView(status=f"⚠ {exc}", columns=empty_headers(names), error=str(exc))
    t0 = time.perf_counter()
    columns = [(column_header(m, scoring), gallery_items(engine, m.hits) if m.ok else [])
               for m in res.methods]
    steps = []
    prog = res.progression
    if prog is not None:
        for s in prog.steps:
            span = "sentence 1" if s.index == 1 else f"sentences 1–{s.index}"
            steps.append((f"**Step {s.index}** · {span}\n\nadds “{s.sentence}”", gallery_items(engine, s.hits)))
    render_ms = (time.perf_counter() - t0) * 1000
    return CompareView(status=status_line(res), timings=timings_line(res, render_ms), columns=columns,
                       progression_header=progression_header(prog), steps=steps,
                       details=details(res, render_ms))


def status_line(res: CompareResult) -> str:
    ref = res.reference
    who = f" ({ref.character})" if ref.character else ""
    n = len(res.sentences)
    head = f"Reference **{ref.label}**{who} · {n} sentence{'s' * (n != 1)} · top-{res.k} by " \
           f"{'Chord' if res.scoring == 'chord' else 'cosine'}"
    if res.query_id:
        gt = f"This is world query **{res.query_id}**: its ground-truth target is framed in green."
    elif ref.row is not None and res.reference.character:
        gt = "Free-text edit: no ground truth for it, so only identity marks are shown."
    else:
        gt = "Uploaded reference: no ground truth and no identity marks."
    bad = [m.label for m in res.methods if not m.ok]
    missing = f" Unavailable: {', '.join(bad)} (see their columns)." if bad else ""
    return f"{head}. {gt}{missing}"


def timings_line(res: CompareResult, render_ms: float) -> str:
    t = res.timings
    return (f"Time: encode {fmt_ms(t['encode'])} · compose {fmt_ms(t['compose'])} · search "
            f"{fmt_ms(t['search'])} · thumbnails {fmt_ms(render_ms)} · "
            f"**total {fmt_ms(t['total'] + render_ms)}**")


def progression_header(prog: Any) -> str:
    if prog is None:
        return "### Progression\nNo method is available for the progression."
    if prog.method == "pace" and prog.native:
        title = "### PACE progression"
    else:
        title = f"### Progression ({prog.label}, not PACE)" if prog.method != "pace" else "### PACE progression"
    return f"{title}\n<div class='small-note'>\n\n{prog.note}. One row per accumulated sentence.\n\n</div>"


def details(res: CompareResult, render_ms: float) -> dict:
    d = res.to_dict()
    d["timings"]["thumbnails"] = round(render_ms, 2)
    return d


def compare_api(engine: Any, reference_id: str | None, edit: str | None, k: int = 8,
                scoring: str = "cosine", lam: float | None = None, upload: str | None = None) -> dict:
    """The JSON API: `CompareResult.to_dict()`, or {"error": message} for a user error."""
    try:
        ref = resolve_reference(engine, reference_id, upload)
        return engine.compare(ref, edit or "", k=int(k), scoring=str(scoring).lower(), lam=lam).to_dict()
    except CIRError as exc:
        return {"error": str(exc)}


def _uploaded(file: Any) -> str | None:
    """The server path of an API upload; only files in Gradio's upload folder are accepted, so a
    client cannot make the server open an arbitrary path."""
    if file is None:
        return None
    path = file.get("path") if isinstance(file, dict) else getattr(file, "path", None)
    if not path:
        return None
    from gradio.utils import get_upload_folder, is_in_or_equal

    if not is_in_or_equal(path, get_upload_folder()):
        raise gr.Error("reference_image must be an uploaded file (gradio_client.handle_file(path))")
    return str(path)


# -- layout and wiring --------------------------------------------------------------------------

@dataclass
class CompareTab:
    """The components other tabs and the page load need."""

    ref_id: Any
    upload: Any
    edit: Any
    k: Any
    scoring: Any
    own_lambda: Any
    lam: Any
    load_outputs: list
    load: Any  # engine -> values for load_outputs


def _warn(msg: str) -> None:
    gr.Warning(msg)


def build(holder: EngineHolder, cfg: AppConfig) -> CompareTab:
    names = list(cfg.columns) + ([cfg.baseline] if cfg.baseline else [])

    with gr.Row(equal_height=False):
        with gr.Column(scale=5, min_width=420):
            gr.Markdown("### 1 · Reference")
            with gr.Tabs():
                with gr.Tab("Gallery", id="ref-gallery"):
                    with gr.Row():
                        search = gr.Textbox(placeholder="Search id, character or caption (e.g. Ada beach)",
                                            show_label=False, scale=4, container=False, elem_id="ref-search")
                        search_btn = gr.Button("Search", scale=1, size="sm")
                    browser = gr.Gallery(show_label=False, columns=6, rows=4, height=470,
                                         allow_preview=False, object_fit="cover", elem_id="ref-browser",
                                         buttons=[], interactive=False)
                    with gr.Row():
                        prev_btn = gr.Button("◀ Prev", size="sm", scale=1)
                        page_label = gr.Markdown("", elem_classes="small-note")
                        next_btn = gr.Button("Next ▶", size="sm", scale=1)
                with gr.Tab("Upload", id="ref-upload"):
                    upload = gr.File(label="Reference image (PNG, JPEG, WebP, BMP; at most "
                                     f"{40} megapixels)", file_types=["image"], type="filepath",
                                     elem_id="ref-upload-file")
                    gr.Markdown("An upload is encoded once and shared by every method. It has no "
                                "ground truth; choosing a gallery image or an example replaces it.",
                                elem_classes="small-note")
                with gr.Tab("Examples", id="ref-examples"):
                    gr.Markdown("World test queries with their edits: click one to load both.",
                                elem_classes="small-note")
                    examples = gr.Gallery(show_label=False, columns=3, height=420, allow_preview=False,
                                          object_fit="cover", elem_id="ref-examples-gallery", buttons=[],
                                          interactive=False)
        with gr.Column(scale=4, min_width=380):
            gr.Markdown("### 2 · Edit")
            with gr.Row(equal_height=True):
                preview = gr.Image(label="Reference", show_label=False, height=190, width=190, interactive=False,
                                   buttons=[], elem_id="ref-preview", scale=0, min_width=190)
                with gr.Column(scale=1):
                    ref_id = gr.Textbox(label="Reference id", placeholder="click a gallery image",
                                        elem_id="ref-id", max_lines=1)
                    ref_info = gr.Markdown("", elem_classes="ref-info")
            edit = gr.Textbox(label="Edit (one or more sentences)", lines=3, max_lines=8,
                              placeholder="Make the square blue. Move the character to the left.",
                              elem_id="edit-text", max_length=MAX_TEXT_CHARS)
            with gr.Row():
                k = gr.Slider(1, min(MAX_K, 20), value=8, step=1, label="Top-k", elem_id="k-slider")
                scoring = gr.Radio(["Cosine", "Chord"], value="Cosine", label="Scoring",
                                   info="Chord adds λ·cos(q − q∅, v − v_r)", elem_id="scoring")
            with gr.Row():
                own_lambda = gr.Checkbox(value=True, label="Each method's own λ", scale=1)
                lam = gr.Slider(0.0, 1.0, value=DEFAULT_LAMBDA, step=0.01, label="λ (Chord)",
                                interactive=False, scale=2)
            run = gr.Button("Compare", variant="primary", elem_id="compare-btn")
            status = gr.Markdown("", elem_classes="status-msg", elem_id="compare-status")
            timings = gr.Markdown("", elem_classes="timings", elem_id="compare-timings")

    gr.Markdown(f"### 3 · Top-k per method\n<div class='small-note'>\n\n{LEGEND}\n\n</div>")
    col_heads, col_gals = [], []
    with gr.Row(equal_height=False, elem_id="result-columns"):
        for n in names:
            with gr.Column(min_width=180, elem_classes="result-col"):
                col_heads.append(gr.Markdown(f"**{method_label(n)}**\n\n&nbsp;", elem_classes="col-head"))
                col_gals.append(gr.Gallery(show_label=False, columns=2, object_fit="contain", height="auto",
                                           elem_classes="result-gallery", buttons=[], interactive=False,
                                           elem_id=f"col-{n}", visible=False))
    prog_head = gr.Markdown("### PACE progression\n<div class='small-note'>\n\nOne row per "
                            "accumulated sentence: 1; 1–2; 1–3; …\n\n</div>", elem_id="prog-head")
    step_mds, step_gals = [], []
    for i in range(MAX_STEPS):
        with gr.Row(equal_height=True, elem_classes="prog-row"):
            step_mds.append(gr.Markdown("", visible=False, elem_classes="step-label", min_width=200,
                                        scale=1))
            step_gals.append(gr.Gallery(show_label=False, columns=8, rows=1, visible=False, height="auto",
                                        object_fit="contain", buttons=[], interactive=False, scale=5,
                                        elem_id=f"prog-step-{i + 1}", elem_classes="prog-gallery"))
    with gr.Accordion("Raw result (JSON): ids, scores, marks, timings", open=False):
        details_json = gr.JSON(show_label=False)

    rows_state = gr.State([])
    page_state = gr.State(0)
    example_ids = gr.State([])

    # -- handlers (thin: engine + the pure functions above) -----------------------------------
    def on_page(search_text: str, page: int, delta: int):
        try:
            items, label, shown, page = page_view(holder.get(), search_text, int(page) + delta)
        except CIRError as exc:
            _warn(str(exc))
            return gr.skip(), f"⚠ {exc}", gr.skip(), gr.skip()
        return items, label, shown, page

    search.submit(lambda s: on_page(s, 0, 0), [search], [browser, page_label, rows_state, page_state],
                  api_visibility="private")
    search_btn.click(lambda s: on_page(s, 0, 0), [search], [browser, page_label, rows_state, page_state],
                     api_visibility="private")
    prev_btn.click(lambda s, p: on_page(s, p, -1), [search, page_state],
                   [browser, page_label, rows_state, page_state], api_visibility="private")
    next_btn.click(lambda s, p: on_page(s, p, +1), [search, page_state],
                   [browser, page_label, rows_state, page_state], api_visibility="private")

    def on_pick(rows: list[int], evt: gr.SelectData):
        try:
            ref, img, info = select_from_page(holder.get(), rows, evt.index)
        except CIRError as exc:
            _warn(str(exc))
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return ref, img, info, None

    browser.select(on_pick, [rows_state], [ref_id, preview, ref_info, upload], api_visibility="private")

    def on_example(ids: list[str], evt: gr.SelectData):
        try:
            ref, text, img, info = select_example(holder.get(), ids, evt.index)
        except (CIRError, IndexError) as exc:
            _warn(str(exc))
            return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return ref, text, img, info, None

    examples.select(on_example, [example_ids], [ref_id, edit, preview, ref_info, upload],
                    api_visibility="private")

    def on_upload(path: str | None):
        if not path:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        try:
            img, info = upload_view(holder.get(), path)
        except CIRError as exc:
            _warn(str(exc))  # the bad file is dropped; the previous reference stays
            return None, gr.skip(), gr.skip(), f"⚠ {exc}. The previous reference is kept."
        return gr.skip(), "", img, info

    upload.upload(on_upload, [upload], [upload, ref_id, preview, ref_info], api_visibility="private")

    def on_ref_id(ref: str):
        if not (ref or "").strip():
            return gr.skip(), gr.skip(), gr.skip()
        try:
            img, info = reference_view(holder.get(), ref)
        except CIRError as exc:
            _warn(str(exc))
            return gr.skip(), gr.skip(), f"⚠ {exc}"
        return img, info, None

    ref_id.submit(on_ref_id, [ref_id], [preview, ref_info, upload], api_visibility="private")
    own_lambda.change(lambda own: gr.update(interactive=not own), [own_lambda], [lam],
                      api_visibility="private")

    def on_compare(ref: str, up: str | None, text: str, kk: float, sc: str, own: bool, lm: float,
                   progress=gr.Progress()):
        try:
            engine = holder.get(progress)
        except CIRError as exc:
            view = CompareView(status=f"⚠ {exc}", columns=empty_headers(names), error=str(exc))
        else:
            view = compare_view(engine, ref, up, text, int(kk), sc, own, lm, names)
        if view.error:
            _warn(view.error)
        out: list[Any] = [view.status, view.timings]
        out += [h for h, _ in view.columns]
        out += [gr.update(value=g, visible=bool(g)) for _, g in view.columns]
        out.append(view.progression_header if view.progression_header else gr.skip())
        for i in range(MAX_STEPS):
            shown = i < len(view.steps)
            out.append(gr.update(value=view.steps[i][0] if shown else "", visible=shown))
        for i in range(MAX_STEPS):
            shown = i < len(view.steps)
            out.append(gr.update(value=view.steps[i][1] if shown else [], visible=shown,
                                 columns=max(int(kk), 1)))
        out.append(view.details)
        return out

    compare_inputs = [ref_id, upload, edit, k, scoring, own_lambda, lam]
    compare_outputs = [status, timings, *col_heads, *col_gals, prog_head, *step_mds, *step_gals, details_json]
    # The button's event feeds ~35 components; programs use the JSON endpoint below instead.
    run.click(on_compare, compare_inputs, compare_outputs, api_name="compare_view",
              api_visibility="undocumented")
    edit.submit(on_compare, compare_inputs, compare_outputs, api_visibility="private")

    def compare(reference_id: str = "", edit: str = "", k: int = 8, scoring: str = "cosine",
                lam: float | None = None, reference_image: FileData | None = None) -> dict:
        """Compare every method on one reference and edit; returns JSON: per-method top-k (gallery
        ids, scores, ground-truth / same-character marks or the reason a method is unavailable),
        the per-sentence progression and the timings. The reference is a gallery id, or an
        uploaded image (reference_image, e.g. gradio_client.handle_file(path)), which wins."""
        return compare_api(holder.get(), reference_id, edit, k, scoring, lam, _uploaded(reference_image))

    gr.api(compare, api_name="compare")

    def load(engine: Any) -> list:
        items, label, shown, page = page_view(engine, "", 0)
        ex_items, ex_ids = example_items(engine)
        first = [gr.skip()] * 4
        if ex_ids:
            ref, text, img, info = select_example(engine, ex_ids, 0)
            first = [ref, text, img, info]
        return [items, label, shown, page, ex_items, ex_ids, *first]

    return CompareTab(ref_id, upload, edit, k, scoring, own_lambda, lam,
                      [browser, page_label, rows_state, page_state, examples, example_ids,
                       ref_id, edit, preview, ref_info], load)
