"""The Annotate tab: a signed-in annotator judges pooled (reference + edit, candidate) pairs, blind to
the method, with the keyboard alone. The queue lives in the DB (`db.queue`), so a refresh or a
return the next day continues at the same task.

Sign-in: Gradio's login page when the app runs with `--annotators FILE`; "Sign in with Hugging
Face" on a Space with `hf_oauth: true`. Without either, annotation is refused. The handlers are
plain functions (`open_view`, `answer_view`, ...) over an `AnnotationService`, tested directly.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import gradio as gr

from db.service import SKIP_REASONS, AnnotationService, QueueState

from .annotate_help import GUIDELINES, guideline_examples
from .common import EngineHolder

if TYPE_CHECKING:
    from cir_core.engine import Engine

IDENTITY = (("yes", "Same character", "1"), ("no", "Different character", "2"),
            ("cant_tell", "Can't tell", "3"))
EDIT = (("yes", "Edit satisfied", "Q"), ("partial", "Partly", "W"), ("no", "Not satisfied", "E"))
IMAGE = 384
NO_SIGN_IN = ("**Sign in to annotate.** Annotation is attributed to a person: run the app with "
              "`--annotators FILE` (Gradio's login page) or, on a Space, set `hf_oauth: true` and use "
              "*Sign in with Hugging Face*.")

def auth_mode() -> str:
    """'hf' on a Space with OAuth configured, else 'password' (Gradio auth, when set at launch)."""
    return "hf" if os.environ.get("SPACE_ID") and os.environ.get("OAUTH_CLIENT_ID") else "password"


def user_of(request: Any, profile: Any = None) -> str | None:
    """The signed-in name: Gradio auth's username, or 'hf:<username>' from Hugging Face OAuth."""
    name = getattr(request, "username", None) if request is not None else None
    if name:
        return str(name)
    if profile is not None and getattr(profile, "username", None):
        return f"hf:{profile.username}"
    return None


@dataclass
class AnnotateView:
    status: str
    edit: str
    reference: Any  # PIL image or None
    candidate: Any
    state: dict = field(default_factory=dict)
    identity: str | None = None
    edit_label: str | None = None
    comment: str = ""


def _image(engine: Engine, item_id: str) -> Any:
    try:
        return engine.image(engine.row_of(item_id), IMAGE)
    except Exception:  # an item no longer in this gallery: say so in the status, show nothing
        return None


def _view(engine: Engine, st: QueueState, note: str = "") -> AnnotateView:
    p = st.progress
    head = (f"Signed in as **{st.user}** · set **{st.query_set}** · **{p.done} / {p.total}** done"
            + (f" ({p.skipped} skipped)" if p.skipped else ""))
    if st.task is None:
        return AnnotateView(f"{head}\n\n✅ Nothing left for you in this set. Thank you!" + note, "",
                            None, None, {"set": st.query_set, "task": None, "latest": st.progress.latest})
    t = st.task
    where = f"pair #{t.position}" + ("" if t.status is None else
                                     f" · your answer: {t.status if t.status == 'skipped' else t.identity + ' / ' + t.edit}"
                                     + (" (changing it keeps the old one in the audit log)"))
    ref, cand = _image(engine, t.reference_id), _image(engine, t.item_id)
    missing = "" if ref is not None and cand is not None else \
        "\n\n⚠ An image of this pair is not in the app's gallery: skip it with reason *other*."
    state = {"set": st.query_set, "task": t.task_id, "position": t.position, "latest": st.progress.latest,
             "shown": time.time(), "identity": t.identity, "edit": t.edit}
    return AnnotateView(f"{head} · {where}{missing}{note}", f"### Edit: “{t.edit_text}”", ref, cand, state,
                        t.identity, t.edit, t.comment or "")


def _elapsed(state: dict) -> int:
    return max(0, int((time.time() - float(state.get("shown") or time.time())) * 1000))


def open_view(svc: AnnotationService, engine: Engine, user: str | None, set_name: str | None,
              position: int | None = None) -> AnnotateView:
    """The screen for `user` in `set_name` (their current task, or the one at `position`)."""
    if not user:
        return AnnotateView(NO_SIGN_IN, "", None, None)
    sets = svc.query_sets()
    if not sets:
        return AnnotateView("No query set to annotate yet: pool one with `python -m db.pooling` "
                            "(see docs/ANNOTATION.md).", "", None, None)
    name = set_name if set_name in sets else sets[0]
    return _view(engine, svc.open(user, name, position))


def choose_view(svc: AnnotationService, engine: Engine, user: str | None, state: dict, kind: str,
                value: str, comment: str | None) -> AnnotateView:
    """One button press: remember the label; with both labels chosen, save and move on."""
    if not user:
        return AnnotateView(NO_SIGN_IN, "", None, None)
    if not state or state.get("task") is None:
        return open_view(svc, engine, user, (state or {}).get("set"))
    state = {**state, kind: value}
    # Save once both questions were answered on this screen (a revisited pair needs both again).
    fresh = set(state.get("_fresh", ())) | {kind}
    state["_fresh"] = sorted(fresh)
    if {"identity", "edit"} <= fresh:
        st = svc.answer(user, state["set"], state["task"], state["identity"], state["edit"],
                        comment=(comment or "").strip() or None, time_spent_ms=_elapsed(state))
        return _view(engine, st, "")
    other = "edit" if kind == "identity" else "identity"
    view = _view(engine, svc.open(user, state["set"], state["position"]),
                 f"\n\nNow the {other} question.")
    view.state = {**view.state, kind: value, "_fresh": state["_fresh"], "shown": state["shown"]}
    view.identity, view.edit_label = view.state.get("identity"), view.state.get("edit")
    view.comment = comment or ""
    return view


def skip_view(svc: AnnotationService, engine: Engine, user: str | None, state: dict, reason: str | None) -> AnnotateView:
    if not user:
        return AnnotateView(NO_SIGN_IN, "", None, None)
    if not state or state.get("task") is None:
        return open_view(svc, engine, user, (state or {}).get("set"))
    st = svc.skip(user, state["set"], state["task"], reason or "other", _elapsed(state))
    return _view(engine, st)


def move_view(svc: AnnotationService, engine: Engine, user: str | None, state: dict, step: str) -> AnnotateView:
    """'back': the previous position; 'next': the first unanswered task."""
    if not user:
        return AnnotateView(NO_SIGN_IN, "", None, None)
    state = state or {}
    pos = state.get("position") or (state.get("latest", 0) + 1)
    if step == "back":
        return open_view(svc, engine, user, state.get("set"), max(1, pos - 1))
    return open_view(svc, engine, user, state.get("set"))


@dataclass
class AnnotateTab:
    load_outputs: list
    load: Any  # (request, profile) -> values for load_outputs


class ServiceHolder:
    """The annotation DB, opened on first use (a bad --db path is reported in the tab, not a crash)."""

    def __init__(self, path: str, service: AnnotationService | None = None):
        self.path, self.service = path, service
        self._lock = threading.Lock()

    def get(self) -> AnnotationService:
        # The Annotate and Results tabs load together: one of them opens (and migrates) the DB.
        with self._lock:
            if self.service is None:
                self.service = AnnotationService(self.path)
            return self.service


def build(holder: EngineHolder, services: ServiceHolder) -> AnnotateTab:
    """Lay out the tab and wire it; returns what the page load fills."""
    c = _layout(auth_mode())
    outs = [c.status, c.edit_md, c.ref_img, c.cand_img, c.comment, c.state, *c.id_btns, *c.ed_btns]
    render = _render

    def on_load(request: gr.Request, profile: gr.OAuthProfile | None):
        user = user_of(request, profile)
        if not user:  # nobody to annotate as: do not even open (or create) the DB
            return [gr.update(choices=[]), *render(AnnotateView(NO_SIGN_IN, "", None, None)), None]
        try:
            svc = services.get()
            eng = holder.get()
            svc.ensure_default_set(eng)
            sets = svc.query_sets()
        except Exception as exc:  # a DB that cannot open must not take the other tabs down
            return [gr.update(), f"⚠ The annotation DB is unavailable: {exc}"] + [gr.skip()] * len(outs)
        dd = gr.update(choices=sets, value=sets[0] if sets else None)
        return [dd, *render(open_view(svc, eng, user, sets[0] if sets else None)), guideline_examples(eng)]

    _wire(holder, services, c, outs, render)
    return AnnotateTab([c.set_dd, *outs, c.examples], on_load)


def _layout(mode: str) -> SimpleNamespace:
    c = SimpleNamespace()
    with gr.Row():
        if mode == "hf":
            gr.LoginButton()
        c.set_dd = gr.Dropdown(label="Query set", choices=[], interactive=True, scale=2, elem_id="ann-set")
    c.status = gr.Markdown(NO_SIGN_IN, elem_id="ann-status", elem_classes="status-msg")
    c.edit_md = gr.Markdown("", elem_id="ann-edit")
    with gr.Row(equal_height=True):
        c.ref_img = gr.Image(label="Reference", type="pil", interactive=False, height=IMAGE,
                             elem_id="ann-ref", buttons=[])
        c.cand_img = gr.Image(label="Candidate", type="pil", interactive=False, height=IMAGE,
                              elem_id="ann-cand", buttons=[])
    with gr.Row():
        c.id_btns = [gr.Button(f"{label}  [{key}]", elem_id=f"ann-id-{v}", size="lg") for v, label, key in IDENTITY]
    with gr.Row():
        c.ed_btns = [gr.Button(f"{label}  [{key}]", elem_id=f"ann-edit-{v}", size="lg") for v, label, key in EDIT]
    with gr.Row(equal_height=True):
        c.comment = gr.Textbox(label="Comment (optional; saved with the answer)", scale=3, max_length=2000)
        c.reason = gr.Dropdown(SKIP_REASONS, value=SKIP_REASONS[0], label="Skip reason", scale=1)
        c.skip_b = gr.Button("Skip  [S]", elem_id="ann-skip", scale=1)
        c.back_b = gr.Button("◀ Back  [B]", elem_id="ann-back", scale=1)
        c.next_b = gr.Button("Next unanswered ▶  [N]", elem_id="ann-next", scale=1)
    with gr.Accordion("Guidelines and examples", open=False):
        gr.Markdown(GUIDELINES)
        c.examples = gr.Gallery(label="Worked examples (the generated world's ground truth)", columns=7,
                                height="auto", allow_preview=True, elem_id="ann-examples",
                                elem_classes="result-gallery")  # full captions below the pictures
    c.state = gr.State({})
    return c


def _render(v: AnnotateView) -> list:
    marks = [gr.update(variant="primary" if v.identity == val else "secondary") for val, _, _ in IDENTITY]
    marks += [gr.update(variant="primary" if v.edit_label == val else "secondary") for val, _, _ in EDIT]
    return [v.status, v.edit, v.reference, v.candidate, v.comment, v.state, *marks]


def _wire(holder: EngineHolder, services: ServiceHolder, c: SimpleNamespace, outs: list, render) -> None:
    """The answer, skip, back/next and set events; a refused or unknown action is a message."""

    def guarded(fn):
        # wraps: Gradio reads the signature (through __wrapped__) to inject request and profile.
        @functools.wraps(fn)
        def run(*args):
            try:
                return render(fn(*args))
            except (PermissionError, LookupError, ValueError) as exc:
                gr.Warning(str(exc))
                return [f"⚠ {exc}"] + [gr.skip()] * (len(outs) - 1)
        return run

    def pick(kind: str, value: str):
        def fn(st: dict, com: str, request: gr.Request, profile: gr.OAuthProfile | None):
            return choose_view(services.get(), holder.get(), user_of(request, profile), st, kind, value, com)
        return guarded(fn)

    for (val, _, _), b in zip(IDENTITY, c.id_btns):
        b.click(pick("identity", val), [c.state, c.comment], outs, api_visibility="private")
    for (val, _, _), b in zip(EDIT, c.ed_btns):
        b.click(pick("edit", val), [c.state, c.comment], outs, api_visibility="private")

    def on_skip(st, why, request: gr.Request, profile: gr.OAuthProfile | None):
        return skip_view(services.get(), holder.get(), user_of(request, profile), st, why)

    def on_move(step: str):
        def fn(st, request: gr.Request, profile: gr.OAuthProfile | None):
            return move_view(services.get(), holder.get(), user_of(request, profile), st, step)
        return guarded(fn)

    def on_set(name, request: gr.Request, profile: gr.OAuthProfile | None):
        return open_view(services.get(), holder.get(), user_of(request, profile), name)

    c.skip_b.click(guarded(on_skip), [c.state, c.reason], outs, api_visibility="private")
    c.back_b.click(on_move("back"), [c.state], outs, api_visibility="private")
    c.next_b.click(on_move("next"), [c.state], outs, api_visibility="private")
    c.set_dd.input(guarded(on_set), [c.set_dd], outs, api_visibility="private")
