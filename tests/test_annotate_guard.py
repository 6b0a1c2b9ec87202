"""Issue 27, items 3 and 4: an annotation handler reads and changes only the signed-in user's
own screen (Gradio keys a session's state by the session hash the request names, not by who is
signed in), and a database failure is named for what it is — busy, disk full, read-only, I/O
error — with only what was checked about the answer (never a blanket "nothing was lost")."""
from __future__ import annotations

from pathlib import Path

import gradio as gr
import pytest
from _cir_fakes import N_QUERIES, plain
from _gradio_raw import call, fn_index, sign_in
from sqlalchemy import event, select
from test_annotate_ui import cir_engine  # noqa: F401 (the fixture: a small engine, methods loaded)

from db.faults import FAULTS, DBFault, describe, fault_kind
from db.models import Annotator, Judgment, Query, QuerySet, Task
from db.service import AnnotationService
from ui import annotate

SET = "faults"


# -- the state belongs to the signed-in user ------------------------------------------------------

@pytest.fixture(scope="module")
def app(tmp_path_factory, cir_engine):
    from test_app_live import _free_port

    from ui import build_demo, launch_kwargs
    from ui.settings import AppConfig

    root = tmp_path_factory.mktemp("guard")
    (root / "users.txt").write_text("alice:wonderland\nbob:builder\n")
    cfg = AppConfig(world_queries=N_QUERIES, host="127.0.0.1", port=_free_port(), db=str(root / "a.sqlite"),
                    annotators=str(root / "users.txt"), annotation_only=True)
    demo = build_demo(cfg, engine=cir_engine)
    demo.cir_services.get().ensure_default_set(cir_engine)  # what the first page load does
    demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs(cfg))
    try:
        yield demo
    finally:
        demo.close()


def test_another_users_session_hash_reads_and_sets_nothing(app) -> None:
    """Bob sends his clicks with Alice's session hash: the request is refused before it reaches
    Gradio (ui/http_guard.py binds a session hash to the user who first named it), so he sees
    nothing of her screen and the label he picks never reaches her answer. (The handlers also
    check the state's owner: test_handlers_ignore_a_state_that_is_not_the_users.)"""
    import httpx

    url = app.local_url
    alice, bob = sign_in(url, "alice", "wonderland"), sign_in(url, "bob", "builder")
    nxt, ident_no, ident_yes, edit_yes = (fn_index(app, api_name=n) for n in (
        "annotate_next", "annotate_identity_no", "annotate_identity_yes", "annotate_edit_yes"))
    hers = "alice-session"
    out = call(url, nxt, [None], cookies=alice, session=hers)["output"]["data"]
    assert "Signed in as **alice**" in out[0] and "pair #1" in out[0]
    out = call(url, ident_yes, [None, ""], cookies=alice, session=hers)["output"]["data"]
    assert "Now the edit question" in out[0]  # Alice's first label, pending in her state

    with pytest.raises(httpx.HTTPStatusError) as refused:
        call(url, ident_no, [None, ""], cookies=bob, session=hers)
    assert refused.value.response.status_code == 403

    call(url, edit_yes, [None, ""], cookies=alice, session=hers)
    call(url, ident_yes, [None, ""], cookies=alice, session=hers)
    call(url, edit_yes, [None, ""], cookies=alice, session=hers)
    svc = app.cir_services.get()
    with svc.ReadSession() as s:
        ids = {name: s.scalar(select(Annotator.id).where(Annotator.name == name)) for name in ("alice", "bob")}
        rows = s.execute(select(Judgment.annotator_id, Judgment.identity)).all()
    assert rows and all(i == "yes" for a, i in rows if a == ids["alice"])  # never Bob's "no"
    assert not [r for r in rows if r[0] == ids["bob"]]  # and Bob saved nothing through her session


def test_own_export_is_served_in_place_and_removed_at_exit(app) -> None:
    """Issue 27: Gradio kept its copies of judgment exports (comments included) past shutdown.
    The export is now served from the app's own folder (a Gradio static path), signed-in only,
    and nothing of it lands in Gradio's cache; the folder goes at exit."""
    import httpx
    from gradio.utils import get_upload_folder

    from ui.tempfiles import TEMP

    url = app.local_url
    alice = sign_in(url, "alice", "wonderland")
    ident, edit, res = (fn_index(app, api_name=n) for n in
                        ("annotate_identity_yes", "annotate_edit_no", "results_compute"))
    sess = "alice-export"
    call(url, fn_index(app, api_name="annotate_next"), [None], cookies=alice, session=sess)
    call(url, ident, [None, "private-comment-27"], cookies=alice, session=sess)
    call(url, edit, [None, "private-comment-27"], cookies=alice, session=sess)
    out = call(url, res, [None, 0], cookies=alice, session=sess)["output"]["data"]  # the set she works in
    paths = [f["path"] for f in out[3]]
    assert len(paths) == 2 and all(Path(p).is_relative_to(TEMP.root) for p in paths)
    got = httpx.get(f"{url}gradio_api/file={paths[0]}", cookies=alice)
    assert got.status_code == 200 and "private-comment-27" in got.text
    assert httpx.get(f"{url}gradio_api/file={paths[0]}").status_code in (401, 403, 404)  # signed out
    cache = Path(get_upload_folder())
    copies = [f for f in cache.rglob("judgments-*") if "private-comment-27" in f.read_text(errors="replace")]
    assert copies == []
    TEMP.close()  # what atexit runs (and SIGTERM, through exit_cleanly_on_sigterm)
    assert not any(Path(p).exists() for p in paths)


def test_handlers_ignore_a_state_that_is_not_the_users(tmp_path) -> None:
    svc = _service(tmp_path / "own.sqlite")
    eng = _NoImages()
    a = annotate._view(eng, svc.open("alice", SET))
    assert a.state["user"] == "alice"
    pending = annotate.choose_view(svc, eng, "alice", a.state, "identity", "yes", "")
    for kind, value in (("identity", "no"), ("edit", "no")):
        v = annotate.choose_view(svc, eng, "bob", pending.state, kind, value, "")
        assert "bob" in v.status and "alice" not in v.status and v.state["user"] == "bob"
    # Skip and Back with her state: Bob's own current pair again, nothing skipped or read of hers.
    assert annotate.skip_view(svc, eng, "bob", pending.state, "other").state["user"] == "bob"
    back = annotate.move_view(svc, eng, "bob", {**pending.state, "position": 2}, "back")
    assert back.state["user"] == "bob" and back.state["position"] == 1
    with svc.ReadSession() as s:
        assert s.scalar(select(Judgment.id).limit(1)) is None  # nothing written by any of it
    svc.close()


# -- database failures, named ------------------------------------------------------------------------

class _NoImages:
    """An engine stand-in for screens whose pictures do not matter here."""

    def row_of(self, item_id: str) -> int:
        raise KeyError(item_id)


def _service(path: Path, n: int = 40) -> AnnotationService:
    svc = AnnotationService(path)
    with svc.Session() as s:
        qs = QuerySet(name=SET, source="test", overlap=1, pool_k=5)
        q = Query(query_set=qs, external_id="q0", reference_id="ref0", edit_text="make it red")
        s.add_all([qs, q, *(Task(query=q, item_id=f"item{i}") for i in range(n))])
        s.commit()
    return svc


def _on_connect(svc: AnnotationService, pragma: str) -> None:
    """Every connection from now on runs `pragma` (the pooled ones are closed first)."""
    svc.engine.dispose()
    event.listen(svc.engine, "connect", lambda conn, _rec: conn.execute(pragma))


def _fail_once(svc: AnnotationService, user: str) -> DBFault:
    st = svc.open(user, SET)
    with pytest.raises(DBFault) as err:
        for i in range(200):  # until the database refuses (a full one refuses once a page is needed)
            st = svc.answer(user, SET, st.task.task_id, "yes", "no", comment=f"{i} " + "x" * 1900)
    return err.value


def test_busy(tmp_path, monkeypatch) -> None:
    import sqlite3

    import db.sqlite

    monkeypatch.setattr(db.sqlite, "BUSY_TIMEOUT_MS", 200)
    svc = _service(tmp_path / "busy.sqlite")
    st = svc.open("ann", SET)
    other = sqlite3.connect(tmp_path / "busy.sqlite", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the lock past the busy timeout
    with pytest.raises(DBFault) as err:
        svc.answer("ann", SET, st.task.task_id, "yes", "no")
    other.execute("ROLLBACK")
    other.close()
    f = err.value
    assert (f.kind, f.writing, f.saved) == ("busy", True, False)
    assert "busy" in f.message() and "not in the database" in f.message() and "again" in f.message()
    svc.answer("ann", SET, st.task.task_id, "yes", "no")  # pressed again: saved
    svc.close()


def test_disk_full(tmp_path) -> None:
    svc = _service(tmp_path / "full.sqlite")
    with svc.ReadSession() as s:
        pages = s.connection().exec_driver_sql("PRAGMA page_count").scalar()
    _on_connect(svc, f"PRAGMA max_page_count = {pages}")  # SQLite's own SQLITE_FULL, as a full disk
    f = _fail_once(svc, "ann")
    assert (f.kind, f.saved) == ("disk_full", False)
    assert "disk is full" in f.message() and "organiser" in f.message()
    svc.close()


def test_read_only(tmp_path) -> None:
    svc = _service(tmp_path / "ro.sqlite")
    _on_connect(svc, "PRAGMA query_only = 1")  # SQLITE_READONLY, as a read-only file or mount
    with pytest.raises(DBFault) as err:
        svc.open("ann", SET)  # a new annotator's first claim is a write
    assert (err.value.kind, err.value.writing) == ("read_only", False)
    assert "read-only" in err.value.message() and "no answer to save" in err.value.message()
    svc.close()


def test_the_tab_shows_what_happened_and_keeps_the_pair(tmp_path) -> None:
    svc = _service(tmp_path / "tab.sqlite")
    eng = _NoImages()
    v = annotate._view(eng, svc.open("ann", SET))
    v = annotate.choose_view(svc, eng, "ann", v.state, "identity", "yes", "")
    _on_connect(svc, "PRAGMA query_only = 1")
    handler = annotate.guard(lambda: annotate.choose_view(svc, eng, "ann", v.state, "edit", "no", ""),
                             annotate._render, 5)
    with pytest.warns(UserWarning, match="read-only"):  # the toast (a warning outside a request)
        out = handler()
    msg = plain(out[0])
    assert msg.startswith("⚠ The annotation database is read-only") and "not in the database" in msg
    assert msg.endswith("press the key again once they say it is fixed.") and "nothing was lost" not in msg
    assert all(x == gr.skip() for x in out[1:])  # the pair, the comment and the state are kept
    svc.close()


def test_every_kind_is_named_from_the_drivers_code() -> None:
    import sqlite3

    import psycopg.errors as pg
    from sqlalchemy.exc import InternalError, OperationalError

    def sqlite_error(code: int, text: str) -> OperationalError:
        e = sqlite3.OperationalError(text)
        e.sqlite_errorcode = code
        return OperationalError("COMMIT", {}, e)

    assert fault_kind(sqlite_error(5, "database is locked")) == "busy"
    assert fault_kind(sqlite_error(13, "database or disk is full")) == "disk_full"
    assert fault_kind(sqlite_error(8 | (1 << 8), "attempt to write a readonly database")) == "read_only"
    assert fault_kind(sqlite_error(10 | (4 << 8), "disk I/O error")) == "io_error"  # SQLITE_IOERR_FSYNC
    assert fault_kind(OperationalError("x", {}, sqlite3.OperationalError("disk I/O error"))) == "io_error"
    assert fault_kind(OperationalError("x", {}, pg.DiskFull("no space"))) == "disk_full"
    assert fault_kind(InternalError("x", {}, pg.ReadOnlySqlTransaction("ro"))) == "read_only"
    assert fault_kind(OperationalError("x", {}, pg.IoError("io"))) == "io_error"
    assert fault_kind(OperationalError("x", {}, pg.SerializationFailure("s"))) == "busy"
    assert fault_kind(OperationalError("x", {}, pg.AdminShutdown("down"))) == "unavailable"
    for kind in FAULTS:
        for saved in (True, False, None):
            assert "nothing was lost" not in describe(kind, saved).lower()


# -- the load bench's client (issue 27, item 7) ---------------------------------------------------

def _load_bench():
    import importlib.util
    import sys

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("load_annotation", root / "bench" / "load_annotation.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_load_benchs_client_speaks_the_pages_protocol(app) -> None:
    """The one-process asyncio client of bench/load_annotation.py against the launched app."""
    import asyncio

    bench = _load_bench()
    Session, event_indices = bench.Session, bench.event_indices

    async def walk() -> list[str]:
        s = Session(app.local_url, await event_indices(app.local_url, ("bob", "builder")))
        try:
            await s.sign_in("bob", "builder")
            first = await s.call("annotate_next")
            pending = await s.call("annotate_identity_yes", "from the bench")
            saved = await s.call("annotate_edit_partial", "from the bench")
            return [first[0], pending[0], saved[0]]
        finally:
            await s.close()

    first, pending, saved = asyncio.run(walk())
    assert "Signed in as **bob**" in first and "Now the edit question" in pending
    assert "pair #" in saved and " done" in saved


def test_the_load_report_survives_none_percentiles() -> None:
    """Gradio's monitoring holds None (NaN) percentiles for a function without timings; the
    report used to crash on them, losing the run's --json."""
    lines = _load_bench()._server_lines({
        "annotate_edit_yes": {"total_requests": 10, "process_time_percentiles":
                              {"50th": 0.008, "90th": 0.015, "99th": 0.03}},
        "annotate_edit_no": {"total_requests": 3, "process_time_percentiles":
                             {"50th": None, "90th": None, "99th": None}},
        "annotate_back": {"total_requests": 2, "process_time_percentiles": {"50th": float("nan")}}})
    assert len(lines) == 2 and "p50 8 ms" in lines[1] and "10 events" in lines[1]
