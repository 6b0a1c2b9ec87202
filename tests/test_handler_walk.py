"""Every registered event of the app, fed each bad value its inputs can carry (issue 15, item 3).

For every event of the Blocks (the normal app and the annotation-only one), every input is in
turn replaced by None, empty, a wrong type, a huge value, an unknown id, an out-of-range number,
HTML, ... while the others keep their initial values; the handler is called the way Gradio calls
it (request, progress, select data injected), signed in and signed out. It must return normally,
its outputs must pass Gradio's post-processing (a message in a file slot fails there, as
`on_ref_id` did), a warning toast must come with a "⚠" message in one of its text outputs, no
user HTML may reach a Markdown output unescaped, and nothing may be logged with an exception.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import math
from typing import Any

import gradio as gr
import pytest
from _cir_fakes import N_QUERIES, fake_methods_engine

from ui.settings import AppConfig

HTML = "<img src=x onerror=alert(1)>"
TEXT_BAD = [None, "", "   ", "x" * 100_000, "test/999999", HTML, 12345, ["a"], {"path": "/etc/hostname"},
            "../../../../etc/hostname", '[{"reference_path": "/etc/hostname", "text": "t"}]']
NUMBER_BAD = [None, -1, 0, 10**12, -10**12, math.nan, math.inf, "abc", True, [3]]
CHOICE_BAD = [None, "", "no-such-choice", 5, ["nope"], HTML]
CHECK_BAD = [None, "yes", 1, [True]]
FILE_BAD = [None, "", "/etc/hostname", {"path": "/etc/hostname"}, {"path": "../../etc/passwd"}, 42,
            ["/etc/hostname"]]
STATE_BAD = [None, {}, [], "x", 7, {"set": 5, "task": "x", "position": None},
             {"set": "world-demo", "task": 10**12, "position": -5, "latest": "z", "shown": "now"},
             {"set": "no-such-set", "task": 1, "position": 1}, {"set": HTML, "task": True, "position": 10**30},
             [10**12, -1, "a"], ["test-00001", None, 5]]
SELECT_BAD = [None, -1, 10**9, "x", [0, 0], True]


def _bad_values(comp: Any) -> list:
    if isinstance(comp, gr.State):
        return STATE_BAD
    if isinstance(comp, (gr.Number, gr.Slider)):
        return NUMBER_BAD
    if isinstance(comp, gr.Checkbox):
        return CHECK_BAD
    if isinstance(comp, (gr.Radio, gr.Dropdown, gr.CheckboxGroup)):
        return CHOICE_BAD
    if isinstance(comp, (gr.File, gr.Image)):
        return FILE_BAD
    return TEXT_BAD


class Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.levelno >= logging.ERROR:
            self.records.append(record)


@pytest.fixture(scope="module")
def engine():
    return fake_methods_engine()


def _demo(engine, tmp_path_factory, only: bool):
    from ui import build_demo

    cfg = AppConfig(world_queries=N_QUERIES, db=str(tmp_path_factory.mktemp("walk") / "ann.sqlite"),
                    annotation_only=only)
    demo = build_demo(cfg, engine=engine)
    svc = demo.cir_services.get()
    svc.ensure_default_set(engine)
    svc.open("walker", "world-demo")  # a queue with a claimed pair, so handlers reach the DB
    return demo


@pytest.fixture(scope="module")
def demos(engine, tmp_path_factory):
    return {"app": _demo(engine, tmp_path_factory, False), "annotation-only": _demo(engine, tmp_path_factory, True)}


def _events() -> list[tuple[str, int]]:
    """(demo kind, event index) of every event: built once here just to enumerate them."""
    from ui import build_demo

    out = []
    for kind, only in (("app", False), ("annotation-only", True)):
        demo = build_demo(AppConfig(world_queries=N_QUERIES, db=":memory:", annotation_only=only))
        out += [(kind, i) for i, bf in demo.fns.items() if bf.fn is not None]
    return out


EVENTS = _events()


def _same_as_earlier(demo: Any, index: int) -> bool:
    """An event wired to the same function and inputs as an earlier one (the Compare button and
    Enter in the edit box): its bad values were already walked; only its defaults are run."""
    bf = demo.fns[index]
    return any(other.fn is bf.fn and [c._id for c in other.inputs] == [c._id for c in bf.inputs]
               for i, other in demo.fns.items() if i < index)


def _takes_request(bf: Any) -> bool:
    import inspect

    fn = getattr(bf.fn, "__wrapped__", bf.fn)
    try:
        return any(p.annotation in (gr.Request, "gr.Request") for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False


def _name(bf: Any) -> str:
    fn = getattr(bf.fn, "__wrapped__", bf.fn)
    return bf.api_name or getattr(fn, "__name__", "?")


def _run(demo: Any, bf: Any, values: list, user: str | None, index: Any) -> tuple[list, list[str]]:
    """Call the event's function as Gradio does; returns (post-processed outputs, toasts)."""
    from gradio.helpers import special_args
    from gradio.state_holder import SessionState

    request = gr.Request(username=user, session_hash="walk")
    evt = gr.SelectData(None, {"index": index, "value": None, "selected": True})
    args, _, _, _ = special_args(bf.fn, list(values), request, evt)
    toasts: list[str] = []
    original = gr.Warning

    def record(message: str = "", *a: Any, **kw: Any) -> None:
        toasts.append(str(message))

    gr.Warning = record  # the handlers call gr.Warning through ui.common.warn
    try:
        raw = bf.fn(*args)
        yields = list(raw) if inspect.isgenerator(raw) else [raw]  # a generator: every update it sends
    finally:
        gr.Warning = original
    for raw in yields:
        processed = asyncio.run(demo.postprocess_data(bf, raw, SessionState(demo)))  # wraps one output
    return ([raw] if len(bf.outputs) == 1 else list(raw)), toasts, processed


@pytest.mark.parametrize("kind, index", EVENTS, ids=[f"{k}-{i}" for k, i in EVENTS])
def test_every_event_turns_bad_input_into_a_message(demos, kind, index):
    demo = demos[kind]
    bf = demo.fns[index]
    name = _name(bf)
    defaults = [getattr(c, "value", None) for c in bf.inputs]
    if any(isinstance(c, gr.State) for c in bf.inputs):  # a realistic state: the walker's screen
        from ui import annotate

        view = annotate.open_view(demo.cir_services.get(), demo.cir_holder.get(), "walker", "world-demo")
        defaults = [view.state if isinstance(c, gr.State) and isinstance(c.value, dict) else d
                    for c, d in zip(bf.inputs, defaults)]
    cases = [(None, None, 0)]  # (input position, value, select index): the defaults themselves
    if not _same_as_earlier(demo, index):
        cases += [(i, v, 0) for i, c in enumerate(bf.inputs) for v in _bad_values(c)]
        cases += [(None, None, s) for s in SELECT_BAD]
    users = ("walker", None) if _takes_request(bf) else ("walker",)  # who is signed in matters to these
    handler = Errors()
    logging.getLogger().addHandler(handler)
    try:
        for user in users:
            for pos, value, sel in cases:
                values = list(defaults)
                if pos is not None:
                    values[pos] = value
                where = f"{name}: input {pos} = {str(value)[:60]!r}, select {sel!r}, user {user!r}"
                try:
                    out, toasts, processed = _run(demo, bf, values, user, sel)
                except Exception as exc:  # noqa: BLE001 (the point of the test)
                    pytest.fail(f"{where}: {type(exc).__name__}: {exc}")
                texts = [o for o in out if isinstance(o, str)]
                if toasts:
                    assert any(t.startswith("⚠") for t in texts), f"{where}: toast {toasts} without a message"
                    assert all("<img" not in t for t in toasts), f"{where}: HTML in a toast"
                for comp, o in zip(bf.outputs, out):
                    if isinstance(comp, gr.Markdown) and isinstance(o, str):
                        assert "<img" not in o, f"{where}: user HTML in a Markdown output"
                assert not handler.records, f"{where}: logged {handler.records[0].getMessage()}"
    finally:
        logging.getLogger().removeHandler(handler)
