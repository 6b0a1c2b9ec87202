"""Issue 42, items 2-5, through the launched app and its real HTTP surface (ui/http_guard.py):
a cross-site sign-in is refused; another user's session stream, queue, heartbeat and cancel are
refused; uploads are off in annotation-only mode and bounded elsewhere; an export is served to
its owner only; and the gold accuracy an annotator sees cannot be read back after changing
answers. Each attack succeeded on dd6dd0f."""
from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest
from _cir_fakes import N_QUERIES
from _gradio_raw import call, fn_index, sign_in
from sqlalchemy import select
from test_annotate_ui import cir_engine  # noqa: F401 (the fixture: a small engine, methods loaded)

from db.models import Annotator, Assignment, Task
from ui.http_guard import UploadLimits, UploadQuota, same_origin


def _launch(root: Path, engine, only: bool):
    from test_app_live import _free_port

    from ui import build_demo, launch_kwargs
    from ui.settings import AppConfig

    (root / "users.txt").write_text("alice:wonderland\nbob:builder\n")
    cfg = AppConfig(world_queries=N_QUERIES, host="127.0.0.1", port=_free_port(), db=str(root / "a.sqlite"),
                    annotators=str(root / "users.txt"), annotation_only=only)
    demo = build_demo(cfg, engine=engine)
    demo.cir_services.get().ensure_default_set(engine)
    demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs(cfg))
    return demo


@pytest.fixture(scope="module")
def only_app(tmp_path_factory, cir_engine):
    demo = _launch(tmp_path_factory.mktemp("guard-only"), cir_engine, only=True)
    try:
        yield demo
    finally:
        demo.close()


@pytest.fixture(scope="module")
def full_app(tmp_path_factory, cir_engine):
    demo = _launch(tmp_path_factory.mktemp("guard-full"), cir_engine, only=False)
    try:
        yield demo
    finally:
        demo.close()


# -- 3. login CSRF -----------------------------------------------------------------------------------

def test_a_sign_in_posted_from_another_site_is_refused(only_app) -> None:
    """A page on another origin auto-submitting the login form would sign the visitor in as the
    attacker (their next answers stored under the attacker's name)."""
    url = only_app.local_url.rstrip("/")
    host = url.split("//", 1)[1]
    form = {"username": "bob", "password": "builder"}
    for headers in ({"Origin": "https://evil.example"}, {"Referer": "https://evil.example/page.html"},
                    {"Origin": "null"}, {"Origin": f"http://{host}.evil.example"}):
        r = httpx.post(f"{url}/login", data=form, headers=headers)
        assert r.status_code == 403 and not r.cookies, headers
    assert httpx.post(f"{url}/login", data=form, headers={"Origin": f"http://{host}"}).status_code == 200
    assert httpx.post(f"{url}/login", data=form).status_code == 200  # a program: no Origin, no victim cookies


def test_origin_rules() -> None:
    allowed = frozenset({"annotate.example.org"})
    assert same_origin({"host": "a.hf.space", "origin": "https://a.hf.space"}, frozenset())
    assert same_origin({"host": "127.0.0.1:7860", "origin": "http://127.0.0.1:7860"}, frozenset())
    assert not same_origin({"host": "127.0.0.1:7860", "origin": "http://127.0.0.1:7861"}, frozenset())
    assert same_origin({"host": "10.0.0.5:7860", "origin": "https://annotate.example.org"}, allowed)
    assert not same_origin({"host": "x", "origin": "https://annotate.example.org.evil"}, allowed)
    assert not same_origin({"host": "x", "referer": "not a url"}, frozenset())


# -- 4. another user's session -----------------------------------------------------------------------

def test_another_users_session_stream_is_refused(only_app) -> None:
    """Bob names Alice's session hash on every session route with his own cookie: each is
    refused before it reaches Gradio, and Alice's next click is answered (it used to hang while
    Bob's stream took her replies)."""
    url = only_app.local_url.rstrip("/")
    alice, bob = sign_in(url, "alice", "wonderland"), sign_in(url, "bob", "builder")
    hers = "alice-stream-1"
    nxt = fn_index(only_app, api_name="annotate_next")
    out = call(url, nxt, [None], cookies=alice, session=hers)["output"]["data"]
    assert "Signed in as **alice**" in out[0]
    api = f"{url}/gradio_api"
    with httpx.Client(cookies=bob, timeout=10) as c:
        assert c.get(f"{api}/queue/data", params={"session_hash": hers}).status_code == 403
        assert c.post(f"{api}/queue/join", json={"data": [None], "event_data": None, "fn_index": nxt,
                                                "trigger_id": None, "session_hash": hers}).status_code == 403
        assert c.get(f"{api}/heartbeat/{hers}").status_code == 403
        assert c.post(f"{api}/cancel", json={"session_hash": hers, "fn_index": nxt,
                                             "event_id": "x"}).status_code == 403
    with httpx.Client(timeout=10) as c:  # signed out: refused too (Gradio's own check, or ours)
        assert c.get(f"{api}/queue/data", params={"session_hash": hers}).status_code in (401, 403)
    done: dict = {}
    t = threading.Thread(target=lambda: done.setdefault("msg", call(url, nxt, [None], cookies=alice, session=hers,
                                                                   timeout=30)))
    t.start()
    t.join(40)
    assert "Signed in as **alice**" in done["msg"]["output"]["data"][0]
    out = call(url, nxt, [None], cookies=bob, session="bob-own")["output"]["data"]
    assert "Signed in as **bob**" in out[0]  # his own sessions work


# -- 5. uploads ---------------------------------------------------------------------------------------

def _upload(url: str, cookies, data: bytes = b"\x89PNG fake", name: str = "x.png", **kw) -> httpx.Response:
    return httpx.post(f"{url}/gradio_api/upload", files={"files": (name, data, "image/png")}, cookies=cookies,
                      timeout=60, **kw)


def test_annotation_only_takes_no_upload(only_app) -> None:
    url = only_app.local_url.rstrip("/")
    r = _upload(url, sign_in(url, "alice", "wonderland"))
    assert r.status_code == 403 and "annotation-only" in r.text


def test_uploads_are_bounded_per_user_and_land_in_the_apps_own_folder(full_app) -> None:
    from ui.tempfiles import TEMP

    url = full_app.local_url.rstrip("/")
    alice, bob = sign_in(url, "alice", "wonderland"), sign_in(url, "bob", "builder")
    r = _upload(url, alice)
    assert r.status_code == 200
    path = Path(r.json()[0])
    assert path.is_relative_to(TEMP.gradio_dir())  # removed with the root at exit, swept after a kill
    codes = [_upload(url, alice, name=f"{i}.png").status_code for i in range(UploadLimits().per_minute + 2)]
    assert codes.count(429) >= 2 and codes[0] == 200  # the minute's quota
    assert _upload(url, bob).status_code == 200  # per user
    big = _upload(url, bob, data=b"\0" * (UploadLimits().max_request_bytes + 1))
    assert big.status_code == 413


def test_the_quota_counts_bytes_and_forgets_after_an_hour() -> None:
    now = [0.0]
    q = UploadQuota(UploadLimits(per_minute=100, per_hour=3, bytes_per_hour=100), clock=lambda: now[0])
    assert q.admit("a", 60) is None and q.admit("a", 30) is None
    assert q.admit("a", 20)[0] == 429  # 110 bytes > 100
    assert q.admit("b", 20) is None
    assert q.admit("a", 5) is None and q.admit("a", 1)[0] == 429  # 3 files an hour
    now[0] = 3601.0
    assert q.admit("a", 60) is None


# -- an export is its owner's ------------------------------------------------------------------------

def test_an_export_is_served_to_its_owner_only(only_app) -> None:
    url = only_app.local_url.rstrip("/")
    alice, bob = sign_in(url, "alice", "wonderland"), sign_in(url, "bob", "builder")
    sess = "alice-export-owner"
    call(url, fn_index(only_app, api_name="annotate_next"), [None], cookies=alice, session=sess)
    call(url, fn_index(only_app, api_name="annotate_identity_yes"), [None, "her-note"], cookies=alice, session=sess)
    call(url, fn_index(only_app, api_name="annotate_edit_no"), [None, "her-note"], cookies=alice, session=sess)
    out = call(url, fn_index(only_app, api_name="results_compute"), [None, 0], cookies=alice, session=sess)
    paths = [f["path"] for f in out["output"]["data"][3]]
    hers = httpx.get(f"{url}/gradio_api/file={paths[0]}", cookies=alice)
    assert hers.status_code == 200 and "her-note" in hers.text
    theirs = httpx.get(f"{url}/gradio_api/file={paths[0]}", cookies=bob)
    assert theirs.status_code == 404 and "her-note" not in theirs.text
    header = hers.text.splitlines()[0]
    assert "item_id" not in header and "query_external_id" not in header and "pair" in header


# -- 2. gold accuracy through the app -------------------------------------------------------------------

def test_gold_accuracy_cannot_be_read_back_through_the_app(full_app) -> None:
    """Carol-like attack, as the issue ran it: finish the set, read the gold line, go Back and
    flip answers, read it again. The line is frozen when first shown."""
    url = full_app.local_url.rstrip("/")
    bob = sign_in(url, "bob", "builder")
    sess = "bob-gold"
    ids = {n: fn_index(full_app, api_name=n) for n in ("annotate_next", "annotate_identity_yes", "annotate_edit_yes",
                                                       "annotate_identity_no", "annotate_edit_no", "annotate_back",
                                                       "results_compute")}
    out = call(url, ids["annotate_next"], [None], cookies=bob, session=sess)["output"]["data"]
    n = 0
    while "Nothing left" not in out[0]:
        call(url, ids["annotate_identity_yes"], [None, ""], cookies=bob, session=sess)
        out = call(url, ids["annotate_edit_yes"], [None, ""], cookies=bob, session=sess)["output"]["data"]
        n += 1
        assert n < 2000
    first = call(url, ids["results_compute"], [None, 0], cookies=bob, session=sess)["output"]["data"][1]
    line = [x for x in first.splitlines() if "Your gold accuracy" in x]
    assert line, first
    svc = full_app.cir_services.get()
    with svc.ReadSession() as s:
        rows = s.execute(select(Assignment.position, Task.gold_identity).join(Task, Assignment.task_id == Task.id)
                         .join(Annotator, Assignment.annotator_id == Annotator.id)
                         .where(Annotator.name == "bob")).all()
    latest = max(p for p, _ in rows)
    golds = sorted((p for p, g in rows if g is not None), reverse=True)[:3]
    assert golds
    for pos in golds:  # Back to each gold pair, flip both answers, look again
        for _ in range(latest - pos + 1):
            out = call(url, ids["annotate_back"], [None], cookies=bob, session=sess)["output"]["data"]
        assert f"pair #{pos}" in out[0]
        call(url, ids["annotate_identity_no"], [None, ""], cookies=bob, session=sess)
        call(url, ids["annotate_edit_no"], [None, ""], cookies=bob, session=sess)
        again = call(url, ids["results_compute"], [None, 0], cookies=bob, session=sess)["output"]["data"][1]
        assert [x for x in again.splitlines() if "Your gold accuracy" in x] == line
