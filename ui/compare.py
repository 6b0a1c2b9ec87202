"""The Compare tab: choose a reference (gallery page, upload, example query), type an edit, see every
method's top-k side by side and the per-sentence progression.

The handlers are plain functions of the engine that return values: the reference ones (`page_view`,
`select_from_page`, `upload_view`, ...) in `reference.py`, the request ones (`compare_view`,
`compare_api`) in `results.py`, both importable from here too; a clicked result's full-size
preview in `preview.py`, the URL's permalink in `permalink.py`. `build` only lays out components
and wires them, so tests call the handlers directly. Errors become messages (a toast and a line in
the tab), never a stack trace.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import gradio as gr
from gradio.data_classes import FileData

from cir_core.engine import MAX_K, MAX_STEPS, MAX_TEXT_CHARS, MAX_UPLOAD_PIXELS, CompareRequest, admit
from cir_core.errors import CIRError
from cir_core.methods import extra_methods, method_label, shown_methods
from cir_core.search import DEFAULT_LAMBDA

from .common import LEGEND, EngineHolder, bool_in, event_index, int_in, list_in, md_text, run_reporting, text_in, warn
from .permalink import LINK_JS, UNLINK_JS, from_query, link_query
from .preview import preview_box, wire_preview
from .reference import (  # noqa: F401
    NO_REFERENCE,
    NO_REFERENCE_INFO,
    PAGE_SIZE,
    PICK_THUMB,
    example_items,
    hints,
    page_view,
    reference_info,
    reference_key,
    reference_view,
    select_example,
    select_from_page,
    stale_status,
    upload_view,
)
from .results import (  # noqa: F401
    CompareView,
    column_header,
    compare_api,
    compare_view,
    details,
    empty_headers,
    progression_header,
    render_compare,
    status_line,
    timings_line,
)
from .settings import AppConfig
from .uploads import UploadRefused, uploaded_path  # noqa: F401

if TYPE_CHECKING:
    from cir_core.engine import Engine


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
    load: Any  # (engine, the page URL's query parameters) -> values for load_outputs
    after_load: Any  # (the page load's event) -> None: presses Compare for a permalink
    browser: Any = None  # the reference browser (the page load's progress bar is drawn over it)


MAX_ID = 500  # a gallery id or a search is never longer; longer input is cut, then not found
MAX_SEARCH = 500
# After the page load: a permalink (a reference and an edit in the URL) whose reference the load
# accepted presses Compare, in the browser. A page without one costs the server nothing more.
AUTORUN_JS = """() => {
  const q = new URLSearchParams(window.location.search);
  const ref = (q.get('ref') || '').trim(), edit = (q.get('edit') || '').trim();
  if (!ref || !edit) return;
  setTimeout(() => {
    const box = document.querySelector('#ref-id input, #ref-id textarea');
    if (box && box.value === ref) document.getElementById('compare-btn')?.click();
  }, 50);
}"""
COUNTER_JS = f"""(t) => {{
  const n = (t || '').split(/\\s+/).filter(Boolean).join(' ').length;
  const over = n > {MAX_TEXT_CHARS};
  return (over ? '⚠ ' : '') + n.toLocaleString('en') + ' / {MAX_TEXT_CHARS:,} characters' +
    (over ? ': over the limit, only the first {MAX_TEXT_CHARS:,} are used' : '');
}}"""
# One Compare request encodes and searches (CPU-bound, torch/faiss use their own threads): two at
# a time keep one core for everything else (the Annotate tab must stay responsive).
COMPARE_CONCURRENCY = 2
BUSY_HEADROOM = 8  # with batching: events past the engine's limit that it answers "busy" at once


def compare_concurrency(cfg: AppConfig) -> int:
    """Compare events Gradio runs at once. With batching the engine's queue runs every forward on
    one thread and admits `max_requests`, so Gradio lets them (and a few more, told they are busy)
    through; without it, two."""
    return cfg.max_requests + BUSY_HEADROOM if cfg.batching else COMPARE_CONCURRENCY


def build(holder: EngineHolder, cfg: AppConfig) -> CompareTab:
    """The Compare tab: layout (reference, edit, results), then its events."""
    names, optional = shown_methods(cfg.methods), extra_methods(cfg.methods)
    c = SimpleNamespace()  # every component, by name: filled by the layout, read by the wiring
    with gr.Row(equal_height=False):
        with gr.Column(scale=5, min_width=420):
            _reference_panel(c)
        with gr.Column(scale=4, min_width=380):
            _edit_panel(c, optional)
    _results_panel(c, names, optional)
    preview_box(c)
    _wire_reference(holder, c)
    _wire_compare(holder, c, names, optional, compare_concurrency(cfg))
    wire_preview(holder, c, [g.elem_id for g in c.col_gals] + [f"step-{i + 1}" for i in range(len(c.step_gals))],
                 [*c.col_gals, *c.step_gals])
    return CompareTab(c.ref_id, c.upload, c.edit, c.k, c.scoring, c.own_lambda, c.lam,
                      [c.browser, c.page_label, c.rows_state, c.page_state, c.examples, c.example_ids,
                       c.ref_id, c.edit, c.preview, c.ref_info, c.k, c.scoring, c.own_lambda, c.lam, c.extra,
                       c.search, c.examples_note],
                      lambda engine, params=None: _load(engine, params, optional),
                      lambda dep: dep.then(None, None, None, js=AUTORUN_JS, api_visibility="private"),
                      c.browser)


def _reference_panel(c: SimpleNamespace) -> None:
    gr.Markdown("### 1 · Reference")
    with gr.Tabs():
        with gr.Tab("Gallery", id="ref-gallery"):
            with gr.Row():
                c.search = gr.Textbox(placeholder="Search id, character or caption",
                                      show_label=False, scale=4, container=False, elem_id="ref-search")
                c.search_btn = gr.Button("Search", scale=1, size="sm")
            c.browser = gr.Gallery(show_label=False, columns=6, rows=4, height="auto", allow_preview=False,
                                   object_fit="cover", elem_id="ref-browser", buttons=[], interactive=False)
            with gr.Row():
                c.prev_btn = gr.Button("◀ Prev", size="sm", scale=1)
                c.page_label = gr.Markdown("", elem_classes="small-note")
                c.next_btn = gr.Button("Next ▶", size="sm", scale=1)
        with gr.Tab("Upload", id="ref-upload"):
            c.upload = gr.File(label="Reference image (PNG, JPEG, WebP, BMP; at most "
                               f"{MAX_UPLOAD_PIXELS // 1_000_000} megapixels)", file_types=["image"],
                               type="filepath", elem_id="ref-upload-file")
            gr.Markdown("An upload is encoded once and shared by every method. It has no "
                        "ground truth; choosing a gallery image or an example replaces it.",
                        elem_classes="small-note")
        with gr.Tab("Examples", id="ref-examples"):
            # what the examples are depends on the gallery: set when the engine is up (`_load`)
            c.examples_note = gr.Markdown("", elem_classes="small-note", elem_id="ref-examples-note")
            c.examples = gr.Gallery(show_label=False, columns=3, height=420, allow_preview=False,
                                    object_fit="cover", elem_id="ref-examples-gallery", buttons=[],
                                    interactive=False)
    c.rows_state, c.page_state, c.example_ids = gr.State([]), gr.State(0), gr.State([])


def _edit_panel(c: SimpleNamespace, optional: list[str]) -> None:
    gr.Markdown("### 2 · Edit")
    with gr.Row(equal_height=True):
        c.preview = gr.Image(label="Reference", show_label=False, height=190, width=190, interactive=False,
                             buttons=[], elem_id="ref-preview", scale=0, min_width=190)
        with gr.Column(scale=1):
            c.ref_id = gr.Textbox(label="Reference id", placeholder="click a gallery image",
                                  elem_id="ref-id", max_lines=1)
            c.ref_info = gr.Markdown("", elem_classes="ref-info")
    # No max_length: the browser would cut a long paste silently. The counter says how long it
    # is; past the limit the request uses its beginning and says so in the status.
    c.edit = gr.Textbox(label="Edit (one or more sentences)", lines=3, max_lines=8,
                        placeholder="Describe the change", elem_id="edit-text")
    c.counter = gr.Markdown(f"0 / {MAX_TEXT_CHARS:,} characters", elem_id="edit-counter",
                            elem_classes="small-note")
    with gr.Row():
        c.k = gr.Slider(1, min(MAX_K, 20), value=8, step=1, label="Top-k", elem_id="k-slider")
        c.scoring = gr.Radio(["Cosine", "Chord"], value="Cosine", label="Scoring",
                             info="Chord adds λ·cos(q − q∅, v − v_r)", elem_id="scoring")
    with gr.Row():
        c.own_lambda = gr.Checkbox(value=True, label="Each method's own λ", scale=1)
        c.lam = gr.Slider(0.0, 1.0, value=DEFAULT_LAMBDA, step=0.01, label="λ (Chord)", interactive=False,
                          scale=2)
    # the registered methods that are not default columns (the zero-shot peers, other baselines)
    c.extra = gr.CheckboxGroup([(method_label(n), n) for n in optional], value=[], label="Also compare",
                               info="extra columns beside the default ones", visible=bool(optional),
                               elem_id="extra-methods")
    # Shift+Enter in the edit box is Gradio's submit for a multi-line textbox (Enter is a newline)
    c.run = gr.Button("Compare  [Shift+Enter]", variant="primary", elem_id="compare-btn")
    c.status = gr.Markdown("", elem_classes="status-msg", elem_id="compare-status")
    c.timings = gr.Markdown("", elem_classes="timings", elem_id="compare-timings")
    with gr.Row(equal_height=False):
        c.permalink = gr.Textbox(label="Link to this result", interactive=False, buttons=["copy"],
                                 visible=False, elem_id="permalink", scale=3, max_lines=1)
        c.csv = gr.DownloadButton("Top-k as CSV", visible=False, elem_id="topk-csv", scale=1, size="sm")


def _results_panel(c: SimpleNamespace, names: list[str], optional: list[str]) -> None:
    gr.Markdown(f"### 3 · Top-k per method\n<div class='small-note'>\n\n{LEGEND}\n\n</div>")
    c.col_heads, c.col_gals, c.opt_cols = [], [], []
    with gr.Row(equal_height=False, elem_id="result-columns"):
        for n in names + optional:
            with gr.Column(min_width=180, elem_classes="result-col", visible=n in names) as col:
                if n in optional:
                    c.opt_cols.append(col)
                c.col_heads.append(gr.Markdown(f"**{method_label(n)}**\n\n&nbsp;", elem_classes="col-head"))
                c.col_gals.append(gr.Gallery(show_label=False, columns=2, object_fit="contain", height="auto",
                                             elem_classes="result-gallery", buttons=[], interactive=False,
                                             elem_id=f"col-{n}", visible=False, allow_preview=False))
    c.prog_head = gr.Markdown("### Progression\n<div class='small-note'>\n\nOne row per accumulated "
                              "sentence: 1; 1–2; 1–3; …\n\n</div>", elem_id="prog-head")
    c.step_mds, c.step_gals = [], []
    for i in range(MAX_STEPS):
        with gr.Row(equal_height=True, elem_classes="prog-row"):
            c.step_mds.append(gr.Markdown("", visible=False, elem_classes="step-label", min_width=200, scale=1))
            c.step_gals.append(gr.Gallery(show_label=False, columns=8, rows=1, visible=False, height="auto",
                                          object_fit="contain", buttons=[], interactive=False, scale=5,
                                          elem_id=f"prog-step-{i + 1}", elem_classes="prog-gallery",
                                          allow_preview=False))
    # why the results are where they are: the map (a click on a result gives its score terms)
    c.why_map = gr.HTML("", elem_id="why-map", padding=False)
    with gr.Accordion("Raw result (JSON): ids, scores, marks, timings", open=False):
        c.details_json = gr.JSON(show_label=False)
    c.picks = gr.State({})
    c.result_ref = gr.State("")  # `reference_key` of the reference the shown results belong to


def _wire_reference(holder: EngineHolder, c: SimpleNamespace) -> None:
    """Browsing, searching, picking, uploading and typing a reference. Every input is coerced
    (`ui.common.*_in`) and every user error is a toast plus a line in the tab. After each change
    of reference, results shown for another one are marked stale (`c.stale`, `mark_stale`)."""
    stale = dict(fn=mark_stale, inputs=[c.ref_id, c.upload, c.result_ref, c.status],
                 outputs=[c.status, c.permalink, c.csv], api_visibility="private")
    c.stale = lambda dep: dep.then(**stale).then(None, [c.status], None, js=UNLINK_JS, api_visibility="private")

    def on_page(search_text: Any, page: Any, delta: int):
        try:
            items, label, shown, page = page_view(holder.get(), text_in(search_text, MAX_SEARCH),
                                                  int_in(page, 0, 0, 10**9) + delta)
        except CIRError as exc:
            warn(str(exc))
            return gr.skip(), f"⚠ {md_text(exc)}", gr.skip(), gr.skip()
        return items, label, shown, page

    page_out = [c.browser, c.page_label, c.rows_state, c.page_state]
    c.search.submit(lambda s: on_page(s, 0, 0), [c.search], page_out, api_visibility="private")
    c.search_btn.click(lambda s: on_page(s, 0, 0), [c.search], page_out, api_visibility="private")
    c.prev_btn.click(lambda s, p: on_page(s, p, -1), [c.search, c.page_state], page_out, api_visibility="private")
    c.next_btn.click(lambda s, p: on_page(s, p, +1), [c.search, c.page_state], page_out, api_visibility="private")

    def on_pick(rows: Any, evt: gr.SelectData):
        try:
            rows = [r for r in list_in(rows, PAGE_SIZE) if isinstance(r, int) and not isinstance(r, bool)]
            ref, img, info = select_from_page(holder.get(), rows, event_index(evt))
        except CIRError as exc:
            warn(str(exc))
            return gr.skip(), gr.skip(), f"⚠ {md_text(exc)}", gr.skip()
        return ref, img, info, None

    c.stale(c.browser.select(on_pick, [c.rows_state], [c.ref_id, c.preview, c.ref_info, c.upload],
                             api_visibility="private"))

    def on_example(ids: Any, evt: gr.SelectData):
        try:
            ids = [i for i in list_in(ids, 100) if isinstance(i, str)]
            i = event_index(evt)
            if not 0 <= i < len(ids):
                raise CIRError("That example is no longer listed; pick again.")
            ref, text, img, info = select_example(holder.get(), ids, i)
        except CIRError as exc:
            warn(str(exc))
            return gr.skip(), gr.skip(), gr.skip(), f"⚠ {md_text(exc)}", gr.skip()
        return ref, text, img, info, None

    c.stale(c.examples.select(on_example, [c.example_ids], [c.ref_id, c.edit, c.preview, c.ref_info, c.upload],
                              api_visibility="private"))

    def on_upload(file: Any, ref: Any):
        try:
            path = uploaded_path(file)
            if not path:
                return gr.skip(), gr.skip(), gr.skip(), gr.skip()
            img, info = upload_view(holder.get(), path)
        except CIRError as exc:
            warn(str(exc))  # the bad file is dropped (and with it an upload it replaced)
            kept = text_in(ref, MAX_ID).strip()
            if kept:  # a gallery reference was chosen: it stays, and is named
                return None, gr.skip(), gr.skip(), f"⚠ {md_text(exc)} The previous reference {md_text(kept)} is kept."
            return None, "", None, f"⚠ {md_text(exc)}\n\n{NO_REFERENCE_INFO}"
        return gr.skip(), "", img, info

    c.stale(c.upload.upload(on_upload, [c.upload, c.ref_id], [c.upload, c.ref_id, c.preview, c.ref_info],
                            api_visibility="private"))
    # the upload's ×: the upload was the reference, so there is none now (and the page says so)
    c.stale(c.upload.clear(lambda: ("", None, NO_REFERENCE_INFO), None, [c.ref_id, c.preview, c.ref_info],
                           api_visibility="private"))

    def on_ref_id(ref: Any):
        ref = text_in(ref, MAX_ID)
        if not ref.strip():
            return gr.skip(), gr.skip(), gr.skip()
        try:
            img, info = reference_view(holder.get(), ref)
        except CIRError as exc:
            warn(str(exc))
            return gr.skip(), f"⚠ {md_text(exc)}", gr.skip()  # (preview, info, upload)
        return img, info, None

    c.stale(c.ref_id.submit(on_ref_id, [c.ref_id], [c.preview, c.ref_info, c.upload], api_visibility="private"))
    c.own_lambda.change(lambda own: gr.update(interactive=not bool_in(own, True)), [c.own_lambda], [c.lam],
                        api_visibility="private")


def mark_stale(ref: Any, up: Any, shown: Any, status: Any) -> list[Any]:
    """After a change of reference: results shown for another reference are marked stale in the
    status, and their permalink and CSV are hidden until Compare runs again."""
    try:
        path = uploaded_path(up)
    except CIRError:
        path = None
    note = stale_status(reference_key(text_in(ref, MAX_ID), path), text_in(shown, 5000), text_in(status, 20_000))
    if note is None:
        return [gr.skip(), gr.skip(), gr.skip()]
    return [note, gr.update(visible=False), gr.update(visible=False)]


def _wire_compare(holder: EngineHolder, c: SimpleNamespace, names: list[str], optional: list[str],
                  concurrency: int) -> None:
    """The Compare button (and Shift+Enter in the edit box), the extra columns, the permalink and
    the JSON endpoint `/compare`."""
    every = names + optional

    def on_compare(ref: Any, up: Any, text: Any, kk: Any, sc: Any, own: Any, lm: Any, extra: Any,
                   progress=gr.Progress()):
        chosen = [n for n in list_in(extra) if isinstance(n, str)]
        active = names + [n for n in optional if n in chosen]
        own, path = bool_in(own, True), None
        try:
            engine = holder.get(progress)
            path = uploaded_path(up)
            # the one place k, λ, scoring, edit and methods are decided (cir_core.engine.admit)
            req = admit(CompareRequest(reference_id=ref, upload=path, edit=text, k=kk, scoring=sc,
                                       lam=None if own else lm, methods=active))
        except CIRError as exc:
            view = CompareView(status=f"⚠ {md_text(exc)}", columns=empty_headers(active), error=str(exc))
            req = None
        else:
            # a first use (a method's load, CIReVL's caption bank) says how far it is meanwhile
            view = run_reporting(lambda: render_compare(engine, req), progress)
        if view.error:
            warn(view.error)
        got = dict(zip(active, view.columns))
        view.columns = [got.get(n, ("", [])) for n in every]  # the extra columns not asked for stay empty
        k = req.k if req is not None else 8
        link = "" if view.error or path or req is None else link_query(
            req.reference_id or "", view.edit, k, req.scoring, req.lam, [n for n in active if n in optional])
        return (view_updates(view, k) + [gr.update(visible=n in active) for n in optional]
                + [view.picks, gr.update(value=view.csv, visible=bool(view.csv)),
                   gr.update(value=link, visible=bool(link)),
                   "" if view.error or req is None else reference_key(req.reference_id or "", path)])

    c.extra.change(lambda extra: [gr.update(visible=n in list_in(extra)) for n in optional], [c.extra], c.opt_cols,
                   api_visibility="private")
    inputs = [c.ref_id, c.upload, c.edit, c.k, c.scoring, c.own_lambda, c.lam, c.extra]
    outputs = [c.status, c.timings, *c.col_heads, *c.col_gals, c.prog_head, *c.step_mds, *c.step_gals,
               c.details_json, c.why_map, *c.opt_cols, c.picks, c.csv, c.permalink, c.result_ref]
    # "Use as the reference" in the result preview runs the Compare again (`ui.preview`)
    c.compare_run = dict(fn=on_compare, inputs=inputs, outputs=outputs, api_visibility="private",
                         concurrency_limit=concurrency, concurrency_id="compare")
    # The button's event feeds ~40 components; programs use the JSON endpoint below instead.
    c.run.click(on_compare, inputs, outputs, api_name="compare_view", api_visibility="undocumented",
                concurrency_limit=concurrency, concurrency_id="compare").then(
                    None, [c.permalink], [c.permalink], js=LINK_JS, api_visibility="private")
    # every event of a group needs the limit: Gradio keeps the lowest one (the default is 1)
    c.edit.submit(on_compare, inputs, outputs, api_visibility="private",
                  concurrency_limit=concurrency, concurrency_id="compare").then(
                      None, [c.permalink], [c.permalink], js=LINK_JS, api_visibility="private")
    c.edit.change(None, [c.edit], [c.counter], js=COUNTER_JS, api_visibility="private")  # in the browser: no request per key

    def compare(reference_id: str = "", edit: str = "", k: int = 8, scoring: str = "cosine",
                lam: float | None = None, reference_image: FileData | None = None, methods: str = "") -> dict:
        """Compare every method on one reference and edit; returns JSON: per-method top-k (gallery
        ids, scores, ground-truth / same-character marks or the reason a method is unavailable),
        the per-sentence progression, the timings and `notes` (what of the input was changed: an
        edit cut at 2,000 characters, a k or λ out of range). The reference is a gallery id, or an
        uploaded image (reference_image, e.g. gradio_client.handle_file(path)), which wins.
        `methods`: comma-separated registered names (default: the app's columns)."""
        try:
            path = uploaded_path(reference_image)
            engine = holder.get()
        except CIRError as exc:
            return {"error": str(exc)}
        return compare_api(engine, reference_id, edit, k, scoring, lam, path, methods)

    gr.api(compare, api_name="compare", concurrency_limit=concurrency, concurrency_id="compare")


def view_updates(view: CompareView, k: int) -> list[Any]:
    """The values of the Compare outputs (status, timings, columns, progression, JSON) for a view."""
    out: list[Any] = [view.status, view.timings]
    out += [h for h, _ in view.columns]
    out += [gr.update(value=g, visible=bool(g)) for _, g in view.columns]
    out.append(view.progression_header if view.progression_header else gr.skip())
    steps = [(view.steps[i] if i < len(view.steps) else None) for i in range(MAX_STEPS)]
    out += [gr.update(value=s[0] if s else "", visible=s is not None) for s in steps]
    out += [gr.update(value=s[1] if s else [], visible=s is not None, columns=max(k, 1)) for s in steps]
    out.append(view.details)
    out.append(view.map_html)
    return out


def _load(engine: Engine, params: Any, optional: list[str]) -> list:
    """The tab's values once the engine is up: the first gallery page, the examples, and the first
    example as the query — or, when the page URL is a permalink, its reference, edit and settings
    (`AUTORUN_JS` then presses Compare)."""
    items, label, shown, page = page_view(engine, "", 0)
    ex_items, ex_ids = example_items(engine)
    hint = hints(engine)
    first = [gr.skip(), gr.update(placeholder=hint.edit), gr.skip(), gr.skip()]
    if ex_ids:
        ref, text, img, info = select_example(engine, ex_ids, 0)
        first = [ref, gr.update(value=text, placeholder=hint.edit), img, info]
    settings = [gr.skip()] * 5
    linked = from_query(params, optional)
    if linked.ref:
        try:
            img, info = reference_view(engine, linked.ref)
        except CIRError as exc:
            linked.notes.append(f"The link's reference cannot be opened: {exc}")
        else:
            first = [linked.ref, gr.update(value=linked.edit if linked.edit is not None else "",
                                           placeholder=hint.edit), img, info]
            settings = [gr.skip() if linked.k is None else linked.k,
                        gr.skip() if linked.scoring is None else linked.scoring,
                        linked.lam is None, gr.update(value=linked.lam if linked.lam is not None else DEFAULT_LAMBDA,
                                                      interactive=linked.lam is not None), linked.extra]
    for note in linked.notes:
        warn(note)
    return [items, label, shown, page, ex_items, ex_ids, *first, *settings,
            gr.update(placeholder=hint.search), hint.examples]
