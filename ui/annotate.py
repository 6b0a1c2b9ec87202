"""The Annotate tab: a signed-in annotator judges pooled (reference + edit, candidate) pairs, blind to
the method, with the keyboard alone. The queue lives in the DB (`db.queue`), so a refresh or a
return the next day continues at the same task.

Sign-in: Gradio's login page when the app runs with `--annotators FILE`; "Sign in with Hugging
Face" on a Space with `hf_oauth: true`. Without either, annotation is refused. The handlers are
plain functions (`open_view`, `choose_view`, ...) over an `AnnotationService`, tested directly.

Under load (docs/ANNOTATION.md, bench/load_annotation.py): the first label of a pair is kept in
the session's state and touches nothing (no DB, no images); the second saves and moves on in one
DB transaction; the pictures are rendered once per item into files (`ItemImages`: the next pairs
are rendered in the background while the annotator judges this one), so a click normally neither
renders nor encodes an image. The events run
`ANNOTATE_CONCURRENCY` at a time (reads in parallel, SQLite serialises the writes).
"""
from __future__ import annotations

import functools
import logging
import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import gradio as gr

from cir_core import env
from db import questions
from db.faults import DBFault, fault_kind, is_fault
from db.faults import describe as describe_fault
from db.service import SKIP_REASONS, AnnotationService, QueueState
from db.users import Roles

from .annotate_help import GUIDELINES, guideline_examples
from .annotate_images import IMAGE, IMAGES, ItemImages, pair_html  # noqa: F401 (the tab's pictures)
from .common import EngineHolder, dict_in, md_text, text_in, warn

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from cir_core.engine import Engine

# (value, the button's words, hotkey) of each question's choices, declared in db/questions.py
IDENTITY = tuple((c.value, c.label, c.key) for c in questions.IDENTITY.choices)
EDIT = tuple((c.value, c.label, c.key) for c in questions.EDIT.choices)
QUESTIONS = tuple(questions.QUESTIONS.values())  # every declared question: a row of buttons each
DEFAULT_ASKED = questions.core("pointwise")  # what the screen shows before a set is open
ANNOTATE_CONCURRENCY = 16  # Annotate/Results-load events run at once (one shared Gradio queue slot set)
MAX_COMMENT = 2000
NO_REASON = ("Choose why you skip this pair first (the list beside Skip: " + ", ".join(SKIP_REASONS)
             + "); nothing was skipped.")
NO_SIGN_IN = ("**Sign in to annotate.** Annotation is attributed to a person: run the app with "
              "`--annotators FILE` (Gradio's login page) or, on a Space, set `hf_oauth: true` and use "
              "*Sign in with Hugging Face*.")

def auth_mode() -> str:
    """'hf' on a Space with OAuth configured, else 'password' (Gradio auth, when set at launch)."""
    return "hf" if env.read("SPACE_ID") and env.read("OAUTH_CLIENT_ID") else "password"


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
    reference: Any  # the picture's file (ItemImages) or None
    candidate: Any
    state: dict = field(default_factory=dict)
    identity: str | None = None
    edit_label: str | None = None
    comment: str = ""
    candidate_b: Any = None  # a pairwise pair's candidate B (`candidate` is A)
    answers: dict = field(default_factory=dict)  # every chosen answer (question -> value): the ✓ marks
    asked: tuple = DEFAULT_ASKED  # the set's questions: only their rows of buttons show


def asked_css(asked: tuple, prefix: str = "ann") -> str:
    """A <style> hiding the rows of the questions this set does not ask (the buttons of every
    declared question are laid out once; a screen shows its set's)."""
    names = {q.name for q in asked}
    # the block holding this <style> takes no room either (a style applies from a hidden block)
    hidden = [f"#{prefix}-asked"] + [f"#{prefix}-row-{q.name}" for q in QUESTIONS if q.name not in names]
    return f"<style>{', '.join(hidden)} {{display: none !important;}}</style>"


def _view(engine: Engine, st: QueueState, note: str = "") -> AnnotateView:
    p = st.progress
    asked = st.questions or DEFAULT_ASKED
    head = (f"Signed in as **{md_text(st.user)}** · set **{md_text(st.query_set)}** · "
            f"**{p.done} / {p.total}** done" + (f" ({p.skipped} skipped)" if p.skipped else ""))
    if st.task is None:
        return AnnotateView(f"{head}\n\n✅ Nothing left for you in this set. Thank you!" + note, "",
                            None, None, {"user": st.user, "set": st.query_set, "task": None,
                                         "latest": st.progress.latest}, asked=asked)
    t = st.task
    saved = dict(t.answers) or {"identity": t.identity, "edit": t.edit}
    where = f"pair #{t.position}" + ("" if t.status is None else
                                     f" · your answer: **{answer_words(t.status, answers=saved, asked=asked)}**"
                                     + (" (changing it keeps the old one in the audit log)"))
    ref, cand = IMAGES.path(engine, t.reference_id, t.character), IMAGES.path(engine, t.item_id)
    cand_b = IMAGES.path(engine, t.item_b_id) if t.item_b_id else None
    IMAGES.prefetch(engine, st.upcoming)
    missing = "" if ref is not None and cand is not None and (cand_b is not None or not t.item_b_id) else \
        "\n\n⚠ An image of this pair is not in the app's gallery: skip it with reason *other*."
    screen = f"{head} · {where}{missing}"
    edit_md = f"### Edit: “{md_text(t.edit_text, 2000)}”"
    if t.item_b_id:
        edit_md += "\n\nTwo candidates, **A** (left) and **B** (right): " + md_text(asked[0].prompt)
    if t.character:  # a frame of several people: say whom to follow (the box is on the reference only)
        who = md_text(t.character.get("name")) or "the boxed person"
        edit_md += f"\n\nThe character: **{who}**, boxed in amber on the reference."
    # "user": whose screen this is. Gradio keys a State by the session hash the request names,
    # not by who is signed in: every handler checks it (`_own_state`).
    # "revision": the saved answer this screen shows, so a save from another tab in between is
    # refused (db.judgments.StaleAnswer) instead of silently overwritten.
    state = {"user": st.user, "set": st.query_set, "task": t.task_id, "position": t.position,
             "latest": st.progress.latest, "revision": t.revision,
             "shown": time.time(), **{q.name: saved.get(q.name) for q in asked}, "screen": screen,
             "ref": ref, "cand": cand, "cand_b": cand_b, "edit_md": edit_md, "asked": [q.name for q in asked]}
    return AnnotateView(f"{screen}{note}", edit_md, ref, cand, state, t.identity, t.edit, t.comment or "",
                        cand_b, {q.name: saved.get(q.name) for q in asked}, asked)


def answer_words(status: str | None, identity: str | None = None, edit: str | None = None,
                 answers: dict | None = None, asked: tuple = ()) -> str:
    """A saved answer as the buttons say it: 'Can't tell · Not satisfied', or 'skipped'."""
    if status == "skipped":
        return "skipped"
    answers = answers if answers is not None else {"identity": identity, "edit": edit}
    order = asked or QUESTIONS
    words = [q.label(answers[q.name]) for q in order if answers.get(q.name)]
    return " · ".join(words) or "none"


def chosen_css(identity: str | None, edit: str | None, answers: dict | None = None, prefix: str = "ann") -> str:
    """A <style> that marks the chosen answers' buttons (✓, filled): it rides on the pair's HTML, so
    showing them costs no button updates (see `build`)."""
    answers = {**(answers or {}), **({"identity": identity} if identity else {}), **({"edit": edit} if edit else {})}
    ids = [f"#{prefix}-{q.element}-{answers[q.name]}" for q in QUESTIONS if answers.get(q.name) in q.values]
    if not ids:
        return ""
    # hovered too: under the pointer that just chose it, the hover colours (lighter fill, grey text:
    # 1.95:1, axe) would otherwise win over the chosen ones. No transition: Gradio's buttons ease
    # "all 0.2s", and for those 0.2 s the half-way colours failed contrast (2.01:1, axe, under load)
    sel = ", ".join(f"{i}, {i}:hover" for i in ids)
    return (f"<style>{sel} {{background: var(--button-primary-background-fill) !important; "
            f"color: var(--button-primary-text-color) !important; "
            f"border-color: var(--button-primary-border-color) !important; transition: none !important;}} "
            + ", ".join(f"{i}::before" for i in ids) + " {content: '✓ ';}</style>")


def _elapsed(state: dict) -> int:
    shown = state.get("shown")
    if isinstance(shown, bool) or not isinstance(shown, (int, float)):
        return 0
    return max(0, min(int((time.time() - float(shown)) * 1000), 24 * 3600 * 1000))


def _own_state(state: Any, user: str) -> dict:
    """The session's state if it is `user`'s screen, else {} (nothing of it is read or kept).

    Gradio keys a gr.State by the session hash a request names; a signed-in user who learns
    another's hash would otherwise read that screen (the reply shows the state's pair) and set
    its pending first label. A state without an owner is nobody's."""
    st = dict_in(state)
    return st if st.get("user") == user else {}


def _valid_state(state: Any, user: str) -> dict | None:
    """`user`'s state when it names a task (ints where ints belong), else None."""
    st = _own_state(state, user)
    task, pos = st.get("task"), st.get("position")
    if not isinstance(st.get("set"), str) or isinstance(task, bool) or not isinstance(task, int) \
            or isinstance(pos, bool) or not isinstance(pos, int) or not isinstance(st.get("revision"), (str, type(None))):
        return None
    return st


def _set_of(state: Any, user: str) -> str | None:
    name = _own_state(state, user).get("set")
    return name if isinstance(name, str) else None


def open_view(svc: AnnotationService, engine: Engine, user: str | None, set_name: str | None,
              position: int | None = None) -> AnnotateView:
    """The screen for `user` in `set_name` (their current task, or the one at `position`)."""
    if not user:
        return AnnotateView(NO_SIGN_IN, "", None, None)
    sets = svc.query_sets()
    if not sets:
        return AnnotateView("No query set to annotate yet: pool one with `python -m db.pooling` "
                            "(see docs/ANNOTATION.md).", "", None, None)
    name = set_name if set_name in sets else (svc.current_set(user) or sets[0])
    return _view(engine, svc.open(user, name, position))


def _asked_of(st: dict) -> tuple:
    """The questions a screen's state says its set asks (declared ones only; default: pointwise core)."""
    names = st.get("asked")
    if not isinstance(names, list):
        return DEFAULT_ASKED
    asked = tuple(q for q in QUESTIONS if q.name in names)
    return asked or DEFAULT_ASKED


def choose_view(svc: AnnotationService, engine: Engine, user: str | None, state: dict, kind: str,
                value: str, comment: str | None) -> AnnotateView:
    """One button press: remember the label; with every question of the set chosen on this
    screen, save and move on. The first labels of a pair touch neither the DB nor the pictures."""
    if not user:
        return AnnotateView(NO_SIGN_IN, "", None, None)
    st = _valid_state(state, user)
    if st is None:
        return open_view(svc, engine, user, _set_of(state, user))
    asked = _asked_of(st)
    if kind not in {q.name for q in asked}:
        raise ValueError(f"this set does not ask {kind!r}")
    st = {**st, kind: value}
    # Save once every question was answered on this screen (a revisited pair needs them all again).
    names = [q.name for q in asked]
    fresh = {f for f in st.get("_fresh", ()) if f in names} | {kind}
    st["_fresh"] = sorted(fresh)
    comment = text_in(comment, MAX_COMMENT + 1)
    if set(names) <= fresh:
        saved = svc.answer(user, st["set"], st["task"], answers={n: st.get(n) for n in names},
                           comment=comment.strip() or None, time_spent_ms=_elapsed(st), expected=st.get("revision"))
        return _view(engine, saved, "")
    left = [q.name for q in asked if q.name not in fresh]
    screen = st.get("screen") if isinstance(st.get("screen"), str) else ""
    chosen = next(q for q in asked if q.name == kind).label(value)
    # The same pair stays on screen: the values it already shows (plain strings are cheaper for
    # Gradio than gr.skip(), which rebuilds the component).
    text = lambda k: st.get(k) if isinstance(st.get(k), str) else None  # noqa: E731
    return AnnotateView(f"{screen}\n\n{kind.capitalize()}: **{chosen}**. Now the {' and '.join(left)} question"
                        + ("s." if len(left) > 1 else "."),
                        text("edit_md") or "", text("ref"), text("cand"), st, st.get("identity"),
                        st.get("edit"), comment, text("cand_b"), {n: st.get(n) for n in names}, asked)


def skip_view(svc: AnnotationService, engine: Engine, user: str | None, state: dict, reason: str | None) -> AnnotateView:
    if not user:
        return AnnotateView(NO_SIGN_IN, "", None, None)
    st = _valid_state(state, user)
    if st is None:
        return open_view(svc, engine, user, _set_of(state, user))
    if reason not in SKIP_REASONS:
        raise ValueError(NO_REASON)
    st_ = svc.skip(user, st["set"], st["task"], reason, _elapsed(st),
                   expected=st.get("revision"))
    return _view(engine, st_)


def move_view(svc: AnnotationService, engine: Engine, user: str | None, state: dict, step: str) -> AnnotateView:
    """'back': the previous position; 'next': the first unanswered task."""
    if not user:
        return AnnotateView(NO_SIGN_IN, "", None, None)
    st = _own_state(state, user)
    pos, latest = st.get("position"), st.get("latest")
    if isinstance(pos, bool) or not isinstance(pos, int):
        pos = (latest if isinstance(latest, int) and not isinstance(latest, bool) else 0) + 1
    if step == "back":
        return open_view(svc, engine, user, _set_of(st, user), max(1, min(pos, 10**9) - 1))
    return open_view(svc, engine, user, _set_of(st, user))


@dataclass
class AnnotateTab:
    load_outputs: list
    load: Any  # (request, profile) -> values for load_outputs


class DBUnavailable(RuntimeError):
    """The annotation DB could not be opened (damaged, empty, unreachable, of a newer version)."""


class ServiceHolder:
    """The annotation DB, opened on first use (a bad --db path is reported in the tab, not a crash).

    A failure to open is remembered for `retry_s`: every click used to reopen the file and run
    the migration again, and answer "Something went wrong... press N" (issue 42). Now each click
    says what is wrong until the next attempt."""

    def __init__(self, path: str, service: AnnotationService | None = None, retry_s: float = 60.0,
                 roles: Roles | None = None):
        self.path, self.service, self.retry_s = path, service, retry_s
        # who reviews and organises (the annotators file's @ lines; a given service's own)
        self.roles = roles or (service.roles if service is not None else Roles())
        self._lock = threading.Lock()
        self._failed: tuple[float, str] | None = None

    def get(self) -> AnnotationService:
        # The Annotate and Results tabs load together: one of them opens (and migrates) the DB.
        with self._lock:
            if self.service is None:
                if self._failed is not None and time.monotonic() - self._failed[0] < self.retry_s:
                    raise DBUnavailable(self._failed[1])
                try:
                    self.service = AnnotationService(self.path, roles=self.roles)
                except Exception as exc:
                    why = describe_fault(fault_kind(exc), writing=False) if is_fault(exc) else str(exc)
                    msg = (f"The annotation database cannot be opened: {why.rstrip('.')}. Nothing can be saved until "
                           "it is fixed: tell the organiser.")
                    log.error("annotation DB %s cannot be opened: %s", self.path, exc)
                    self._failed = (time.monotonic(), msg)
                    raise DBUnavailable(msg) from exc
                self._failed = None
            return self.service


def build(holder: EngineHolder, services: ServiceHolder) -> AnnotateTab:
    """Lay out the tab and wire it; returns what the page load fills."""
    c = _layout(auth_mode())
    # No button-variant updates among the outputs: Gradio re-validates a component for every
    # prop update (about 5 % of a click's server CPU each); the chosen label is in the status.
    # `asked`: a <style> showing only the set's questions (one short string, no component update).
    outs = [c.status, c.edit_md, c.pair, c.comment, c.state, c.asked]
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
            name = svc.current_set(user)
            view = open_view(svc, eng, user, name)
        except PermissionError as exc:  # paused by the organiser, a refused name
            return [gr.update(), f"⚠ {md_text(exc)}"] + [gr.skip()] * (len(outs) - 1) + [gr.skip()]
        except Exception as exc:  # a DB that cannot open must not take the other tabs down
            log.warning("Annotate tab could not load for %r: %s", user, exc)
            return [gr.update(), f"⚠ The annotation DB is unavailable: {md_text(exc)}"] + \
                [gr.skip()] * (len(outs) - 1) + [gr.skip()]
        dd = gr.update(choices=sets, value=name)
        return [dd, *render(view), guideline_examples(eng)]

    _wire(holder, services, c, outs, render)
    return AnnotateTab([c.set_dd, *outs, c.examples], on_load)


def _layout(mode: str) -> SimpleNamespace:
    """One screen that fits a 1440x900 laptop without scrolling (the pictures shrink with the
    window's height, the set list sits beside the status), a column on a phone. The keys are
    shown on the buttons by CSS (ui/common.py), only where there is a keyboard."""
    c = SimpleNamespace()
    with gr.Row(elem_id="ann-head"):
        if mode == "hf":
            gr.LoginButton()
        # Compact (no frame, the label inside the control) so that the pair fits on the screen.
        c.set_dd = gr.Dropdown(label="Query set", choices=[], interactive=True, show_label=False, container=False,
                               scale=0, min_width=260, elem_id="ann-set")
    c.status = gr.Markdown(NO_SIGN_IN, elem_id="ann-status", elem_classes="status-msg")
    c.edit_md = gr.Markdown("", elem_id="ann-edit")
    c.pair = gr.HTML("", elem_id="ann-pair")  # pair_html: reference and candidate side by side
    # A row of buttons per declared question (db/questions.py); `asked` shows the set's only.
    c.q_btns = {}
    for q in QUESTIONS:
        with gr.Row(elem_id=f"ann-row-{q.name}", elem_classes="ann-answers"):
            c.q_btns[q.name] = [gr.Button(ch.label, elem_id=f"ann-{q.element}-{ch.value}", size="lg")
                                for ch in q.choices]
    c.id_btns, c.ed_btns = c.q_btns["identity"], c.q_btns["edit"]
    c.asked = gr.HTML(asked_css(DEFAULT_ASKED), elem_id="ann-asked", padding=False)
    with gr.Row(equal_height=True, elem_id="ann-tools"):
        c.comment = gr.Textbox(label="Comment (optional; saved with the answer)", placeholder="Comment (optional)",
                               show_label=False, container=False, lines=1, max_lines=4, scale=3, min_width=200,
                               max_length=2000, elem_id="ann-comment")
        # No default reason: a skip says why, chosen by the annotator (S used to store the first
        # reason without anyone choosing it).
        c.reason = gr.Dropdown(SKIP_REASONS, value=None, label="Skip reason", show_label=False, container=False,
                               scale=2, min_width=190, elem_id="ann-skip-reason")
        c.skip_b = gr.Button("Skip", elem_id="ann-skip", scale=1, min_width=100)
        c.back_b = gr.Button("◀ Back", elem_id="ann-back", scale=1, min_width=110)
        c.next_b = gr.Button("Next ▶", elem_id="ann-next", scale=1, min_width=110)  # the first unanswered pair
    with gr.Accordion("Guidelines and examples", open=False):
        gr.Markdown(GUIDELINES)
        c.examples = gr.Gallery(label="Worked examples (the generated world's ground truth)", columns=7,
                                height="auto", allow_preview=True, elem_id="ann-examples",
                                elem_classes="result-gallery")  # full captions below the pictures
    c.state = gr.State({})
    return c


def _render(v: AnnotateView) -> list:
    pair = pair_html(v.reference, v.candidate, v.candidate_b, answers=v.answers or
                     {"identity": v.identity, "edit": v.edit_label}) \
        if (v.reference or v.candidate or v.state.get("task")) else ""
    chosen = chosen_css(v.identity, v.edit_label, v.answers) if pair else ""
    return [v.status, v.edit, pair + chosen, v.comment, v.state, asked_css(v.asked)]


def guard(fn: Any, render: Any, n_out: int) -> Any:
    """`fn` as a Gradio handler: its view rendered, or a refusal or failure as a message (the
    other outputs skipped, so the session's state is kept); a database failure is named for
    what it is, with only what was checked about the answer (db.faults)."""
    # wraps: Gradio reads the signature (through __wrapped__) to inject request and profile.
    @functools.wraps(fn)
    def run(*args):
        try:
            return render(fn(*args))
        except (PermissionError, LookupError, ValueError, DBUnavailable) as exc:
            msg = str(exc)
        except DBFault as exc:
            msg = exc.message()
        except Exception as exc:
            if not is_fault(exc):
                log.exception("Annotate handler failed")
                msg = "Something went wrong on the server: press N to reload your current pair."
            else:  # e.g. the DB could not be opened: no answer was in this call
                log.warning("annotation DB %s: %s", fault_kind(exc), getattr(exc, "orig", exc))
                msg = describe_fault(fault_kind(exc), writing=False)
        warn(msg)
        return [f"⚠ {md_text(msg, 1000)}"] + [gr.skip()] * (n_out - 1)
    return run


def _wire(holder: EngineHolder, services: ServiceHolder, c: SimpleNamespace, outs: list, render) -> None:
    """The answer, skip, back/next and set events; a refused or unknown action is a message.

    The events share one Gradio concurrency group (`ANNOTATE_CONCURRENCY` at a time): reads run
    in parallel, SQLite serialises the writes. They are callable by name (api_visibility
    "undocumented": not listed, but gradio_client can drive them as the page does; every call
    still needs a signed-in user and only touches that user's queue)."""
    guarded = functools.partial(guard, render=render, n_out=len(outs))

    group = {"concurrency_limit": ANNOTATE_CONCURRENCY, "concurrency_id": "annotate",
             "api_visibility": "undocumented"}

    def pick(kind: str, value: str):
        def fn(st: dict, com: str, request: gr.Request, profile: gr.OAuthProfile | None):
            return choose_view(services.get(), holder.get(), user_of(request, profile), st, kind, value, com)
        return guarded(fn)

    for q in QUESTIONS:
        for ch, b in zip(q.choices, c.q_btns[q.name]):
            b.click(pick(q.name, ch.value), [c.state, c.comment], outs, api_name=f"annotate_{q.name}_{ch.value}",
                    **group)

    def on_skip(st, why, request: gr.Request, profile: gr.OAuthProfile | None):
        return skip_view(services.get(), holder.get(), user_of(request, profile), st, why)

    def on_move(step: str):
        def fn(st, request: gr.Request, profile: gr.OAuthProfile | None):
            return move_view(services.get(), holder.get(), user_of(request, profile), st, step)
        return guarded(fn)

    def on_set(name, request: gr.Request, profile: gr.OAuthProfile | None):
        svc = services.get()
        name = name if isinstance(name, str) and name in svc.query_sets() else None
        return open_view(svc, holder.get(), user_of(request, profile), name)

    skip_guarded = guarded(on_skip)

    @functools.wraps(on_skip)  # Gradio reads the signature (request, profile) through __wrapped__
    def skip_and_clear(st, why, request: gr.Request, profile: gr.OAuthProfile | None):
        out = skip_guarded(st, why, request, profile)
        refused = isinstance(out[0], str) and out[0].startswith("⚠")
        return [*out, gr.skip() if refused else None]  # the next skip's reason is chosen afresh
    c.skip_b.click(skip_and_clear, [c.state, c.reason], [*outs, c.reason], api_name="annotate_skip", **group)
    c.back_b.click(on_move("back"), [c.state], outs, api_name="annotate_back", **group)
    c.next_b.click(on_move("next"), [c.state], outs, api_name="annotate_next", **group)
    c.set_dd.input(guarded(on_set), [c.set_dd], outs, api_name="annotate_set", **group)
