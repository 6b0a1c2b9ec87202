"""The Review tab: a reviewer decides the pairs whose answers disagree (and an audit share of agreed
ones), seeing the pair and the answers given — anonymised, in a canonical order, never who gave
them, never the method (db/review.py). Shown to reviewers only (`@reviewer NAME` in the annotators
file); the service refuses everyone else whatever the page sends.

The same keys as the Annotate tab (db/questions.py): with every question of the set chosen, the
decision is saved (with the optional note) and the next pair shown; N reloads.
"""
from __future__ import annotations

import functools
import html
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import gradio as gr

from db import questions
from db.review import ReviewState

from .annotate import NO_SIGN_IN, DBUnavailable, ServiceHolder, asked_css, chosen_css, guard, user_of
from .annotate_images import IMAGES, pair_html
from .common import EngineHolder, dict_in, md_text, text_in

if TYPE_CHECKING:
    from cir_core.engine import Engine
    from db.service import AnnotationService

QUESTIONS = tuple(questions.QUESTIONS.values())
NOT_REVIEWER = ("**Reviewers only.** The organiser names reviewers in the annotators file "
                "(`@reviewer NAME`, docs/ANNOTATION.md).")
MAX_NOTE = 2000


@dataclass
class ReviewScreen:
    status: str
    edit: str = ""
    pair: str = ""
    answers: str = ""
    state: dict = field(default_factory=dict)
    asked: tuple = questions.core("pointwise")


def answers_html(st: ReviewState) -> str:
    """The answers given, numbered in their canonical order, in the buttons' words (no names)."""
    if st.task is None:
        return ""
    rows = "".join(f"<li>{' · '.join(q.label(a.get(q.name)) for q in st.questions if a.get(q.name))}</li>"
                   for a in st.task.answers)
    return (f"<div id='rev-answer-list'><b>The answers given</b> ({len(st.task.answers)}, anonymised, sorted "
            f"by answer):<ol>{rows}</ol></div>")


def screen(engine: Engine, st: ReviewState, note: str = "") -> ReviewScreen:
    head = (f"Reviewer **{md_text(st.user)}** · set **{md_text(st.query_set)}** · **{st.left}** waiting · "
            f"you decided **{st.decided}**")
    if st.task is None:
        return ReviewScreen(f"{head}\n\n✅ Nothing waits for your review in this set." + note,
                            state={"user": st.user, "set": st.query_set, "task": None}, asked=st.questions)
    t = st.task
    ref, cand = IMAGES.path(engine, t.reference_id, t.character), IMAGES.path(engine, t.item_id)
    cand_b = IMAGES.path(engine, t.item_b_id) if t.item_b_id else None
    edit = f"### Edit: “{md_text(t.edit_text, 2000)}”"
    if t.character:
        edit += f"\n\nThe character: **{md_text(t.character.get('name')) or 'the boxed person'}**, boxed in amber."
    pair = pair_html(ref, cand, cand_b, prefix="rev")  # chosen answers: added by `render`
    status = f"{head}\n\nDecide the final answer to every question (your note is optional)." + note
    state = {"user": st.user, "set": st.query_set, "task": t.task_id, "shown": time.time(),
             "asked": [q.name for q in st.questions], "status": status, "edit": edit, "pair": pair,
             "answers": answers_html(st)}
    return ReviewScreen(status, edit, pair, state["answers"], state, st.questions)


def open_screen(svc: AnnotationService, engine: Engine, user: str | None, set_name: str | None) -> ReviewScreen:
    if not user:
        return ReviewScreen(NO_SIGN_IN)
    if not svc.roles.is_reviewer(user):
        return ReviewScreen(NOT_REVIEWER)
    sets = svc.query_sets()
    if not sets:
        return ReviewScreen("No query set yet.")
    name = set_name if set_name in sets else (svc.current_set(user) or sets[0])
    return screen(engine, svc.review_open(user, name))


def choose(svc: AnnotationService, engine: Engine, user: str | None, state: Any, kind: str, value: str,
           note: str | None) -> ReviewScreen:
    """One button: remember the label; with every question chosen, decide and move on."""
    if not user:
        return ReviewScreen(NO_SIGN_IN)
    st = dict_in(state)
    if st.get("user") != user or isinstance(st.get("task"), bool) or not isinstance(st.get("task"), int) \
            or not isinstance(st.get("set"), str):
        return open_screen(svc, engine, user, st.get("set") if st.get("user") == user else None)
    names = [n for n in st.get("asked", []) if n in questions.QUESTIONS]
    if kind not in names:
        raise ValueError(f"this set does not ask {kind!r}")
    st = {**st, kind: value, "_fresh": sorted({*st.get("_fresh", []), kind} & set(names))}
    if set(names) <= set(st["_fresh"]):
        nxt = svc.adjudicate(user, st["set"], st["task"], {n: st[n] for n in names},
                             text_in(note, MAX_NOTE + 1).strip() or None)
        return screen(engine, nxt, "")
    asked = tuple(q for q in QUESTIONS if q.name in names)
    label = questions.QUESTIONS[kind].label(value)
    left = [n for n in names if n not in st["_fresh"]]
    return ReviewScreen(f"{st.get('status', '')}\n\n{kind.capitalize()}: **{label}**. Now the {' and '.join(left)} "
                        "question.", st.get("edit", ""), st.get("pair", ""), st.get("answers", ""), st, asked)


def render(v: ReviewScreen) -> list:
    chosen = {n: v.state.get(n) for n in v.state.get("_fresh", [])}
    css = chosen_css(None, None, chosen, prefix="rev") if v.pair else ""
    # the chosen answers ride on the pair as data attributes too (aria-pressed, ui/annotate_help.py)
    pair = v.pair.replace("<div class='ann-pair'", "<div class='ann-pair'" + "".join(
        f" data-{k}='{html.escape(val, quote=True)}'" for k, val in chosen.items() if isinstance(val, str)), 1)
    return [v.status, v.edit, pair + css, v.answers, v.state, asked_css(v.asked, prefix="rev")]


@dataclass
class ReviewTab:
    load_outputs: list
    load: Any


def build(holder: EngineHolder, services: ServiceHolder, tab: Any) -> ReviewTab:
    """Lay out the tab (inside `tab`, which the page load shows to reviewers only) and wire it."""
    c = SimpleNamespace()
    c.set_dd = gr.Dropdown(label="Query set", choices=[], elem_id="rev-set")
    c.status = gr.Markdown(NOT_REVIEWER, elem_id="rev-status", elem_classes="status-msg")
    c.edit = gr.Markdown("", elem_id="rev-edit")
    c.pair = gr.HTML("", elem_id="rev-pair")
    c.answers = gr.HTML("", elem_id="rev-answers")
    btns = {}
    for q in QUESTIONS:
        with gr.Row(elem_id=f"rev-row-{q.name}", elem_classes="ann-answers"):  # keys shown by CSS
            btns[q.name] = [gr.Button(ch.label, elem_id=f"rev-{q.element}-{ch.value}", size="lg")
                            for ch in q.choices]
    with gr.Row(equal_height=True):
        c.note = gr.Textbox(label="Note (optional; kept with the decision)", scale=4, max_length=MAX_NOTE,
                            elem_id="rev-note")
        c.next_b = gr.Button("Reload ▶", elem_id="rev-next", scale=1, min_width=110)
    c.state = gr.State({})
    c.asked = gr.HTML(asked_css(questions.core("pointwise"), prefix="rev"), elem_id="rev-asked", padding=False)
    outs = [c.status, c.edit, c.pair, c.answers, c.state, c.asked]
    guarded = functools.partial(guard, render=render, n_out=len(outs))
    group = {"concurrency_limit": 4, "concurrency_id": "review", "api_visibility": "undocumented"}

    def pick(kind: str, value: str):
        def fn(st: dict, note: str, request: gr.Request, profile: gr.OAuthProfile | None):
            return choose(services.get(), holder.get(), user_of(request, profile), st, kind, value, note)
        return guarded(fn)

    for q in QUESTIONS:
        for ch, b in zip(q.choices, btns[q.name]):
            b.click(pick(q.name, ch.value), [c.state, c.note], outs, api_name=f"review_{q.name}_{ch.value}", **group)

    def reload(st, request: gr.Request, profile: gr.OAuthProfile | None):
        st = dict_in(st)
        return open_screen(services.get(), holder.get(), user_of(request, profile),
                           st.get("set") if isinstance(st.get("set"), str) else None)

    def on_set(name, request: gr.Request, profile: gr.OAuthProfile | None):
        return open_screen(services.get(), holder.get(), user_of(request, profile), name if isinstance(name, str) else None)

    c.next_b.click(guarded(reload), [c.state], outs, api_name="review_next", **group)
    c.set_dd.input(guarded(on_set), [c.set_dd], outs, api_name="review_set", **group)

    def on_load(request: gr.Request, profile: gr.OAuthProfile | None):
        user = user_of(request, profile)
        if not user or not services.roles.is_reviewer(user):  # nobody to review as: the DB is not even opened
            return [gr.update(visible=False), gr.update(choices=[]), *render(ReviewScreen(NOT_REVIEWER))]
        try:
            svc = services.get()
            if not svc.roles.is_reviewer(user):
                return [gr.update(visible=False), gr.update(choices=[]), *render(ReviewScreen(NOT_REVIEWER))]
            sets = svc.query_sets()
            name = svc.current_set(user)
            view = open_screen(svc, holder.get(), user, name)
        except (DBUnavailable, PermissionError, LookupError) as exc:
            return [gr.update(), gr.update(), f"⚠ {md_text(exc)}"] + [gr.skip()] * (len(outs) - 1)
        return [gr.update(visible=True), gr.update(choices=sets, value=name), *render(view)]

    return ReviewTab([tab, c.set_dd, *outs], on_load)
