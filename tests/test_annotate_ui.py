"""The Annotate tab's handlers over a real annotation DB, and the sign-in file."""
from __future__ import annotations

from pathlib import Path

import pytest
from _cir_fakes import fake_trained_methods, make_test_engine, plain

from db.service import DEFAULT_SET, AnnotationService
from db.users import checker, load_users
from ui import annotate


@pytest.fixture(scope="module")
def cir_engine():
    with fake_trained_methods():
        e = make_test_engine()
        e.methods.available()
        yield e


@pytest.fixture(scope="module")
def svc(tmp_path_factory, cir_engine):
    # One pooled DB for the module (pooling runs 8 retrievals per query); tests use their own users.
    s = AnnotationService(tmp_path_factory.mktemp("ann") / "ann.sqlite")
    assert s.ensure_default_set(cir_engine) == DEFAULT_SET
    assert s.ensure_default_set(cir_engine) is None  # pooled once
    yield s
    s.close()


def _press(svc, eng, user, view, identity, edit):
    view = annotate.choose_view(svc, eng, user, view.state, "identity", identity, "")
    assert "Now the edit question" in view.status
    return annotate.choose_view(svc, eng, user, view.state, "edit", edit, "")


def test_refused_without_sign_in(svc, cir_engine) -> None:
    v = annotate.open_view(svc, cir_engine, None, DEFAULT_SET)
    assert v.status == annotate.NO_SIGN_IN and v.reference is None and v.state == {}
    v = annotate.choose_view(svc, cir_engine, None, {"set": DEFAULT_SET, "task": 1}, "identity", "yes", "")
    assert v.status == annotate.NO_SIGN_IN
    assert annotate.user_of(None) is None
    assert annotate.user_of(type("R", (), {"username": None})(), type("P", (), {"username": "ada"})()) == "hf:ada"


def test_answer_resume_back_and_change(svc, cir_engine) -> None:
    v = annotate.open_view(svc, cir_engine, "ann1", DEFAULT_SET)
    assert v.reference is not None and v.candidate is not None and v.state["position"] == 1
    assert "0 / " in v.status and v.edit.startswith("### Edit")
    first = v.state["task"]
    v = _press(svc, cir_engine, "ann1", v, "yes", "partial")
    assert v.state["position"] == 2 and "1 / " in v.status
    # Coming back (a new page load) continues at position 2.
    again = annotate.open_view(svc, cir_engine, "ann1", DEFAULT_SET)
    assert again.state["task"] == v.state["task"]
    back = annotate.move_view(svc, cir_engine, "ann1", again.state, "back")
    assert back.state["task"] == first and (back.identity, back.edit_label) == ("yes", "partial")
    changed = _press(svc, cir_engine, "ann1", back, "no", "no")
    assert changed.state["position"] == 2  # saved, and back to the first open pair
    assert annotate.move_view(svc, cir_engine, "ann1", changed.state, "back").identity == "no"
    skipped = annotate.skip_view(svc, cir_engine, "ann1", changed.state, "candidate unclear")
    assert skipped.state["position"] == 3 and "1 skipped" in skipped.status


def test_annotators_do_not_see_each_other(svc, cir_engine) -> None:
    a = annotate.open_view(svc, cir_engine, "ann3", DEFAULT_SET)
    _press(svc, cir_engine, "ann3", a, "yes", "yes")
    b = annotate.open_view(svc, cir_engine, "ann2", DEFAULT_SET)
    assert b.state["task"] != a.state["task"] and b.identity is None  # overlap 1: another pair
    # Bob forging Alice's task id in his state is refused by the queue.
    with pytest.raises(PermissionError):
        annotate.choose_view(svc, cir_engine, "ann2", {**b.state, "task": a.state["task"],
                                                       "_fresh": ["identity"]}, "edit", "no", "")


def test_users_file(tmp_path: Path) -> None:
    import hashlib

    f = tmp_path / "users.txt"
    f.write_text(f"# annotators\nalice:wonderland\nbob:sha256:{hashlib.sha256(b'pw').hexdigest()}\n")
    check = checker(f)
    assert check("alice", "wonderland") and check("bob", "pw")
    assert not check("alice", "x") and not check("carol", "wonderland") and not check("bob", "")
    f.write_text("alice\n")
    with pytest.raises(ValueError, match="users.txt:1"):
        load_users(f)
    f.write_text("a:1\na:2\n")
    with pytest.raises(ValueError, match="twice"):
        load_users(f)
    with pytest.raises(FileNotFoundError):
        load_users(tmp_path / "missing.txt")


def test_results_tab_rates_and_own_export(svc, cir_engine, tmp_path) -> None:
    from db.export import read_csv
    from ui import annotation_results as ar

    holder = annotate.ServiceHolder(str(svc.path), svc)
    assert ar.results_view(holder, None, DEFAULT_SET, None).summary == annotate.NO_SIGN_IN
    v = annotate.open_view(svc, cir_engine, "res1", DEFAULT_SET)
    for _ in range(6):
        v = _press(svc, cir_engine, "res1", v, "yes", "no")
    out = ar.results_view(holder, "res1", DEFAULT_SET, 1, out_dir=tmp_path)
    summary = plain(out.summary)
    for name in cir_engine.methods.columns:
        assert f"| {name} · cosine |" in summary
    assert out.figure is not None and len(out.files) == 2
    assert "**Pairwise @1**" in summary and " − pact · cosine |" in summary
    rows = read_csv(out.files[0])
    assert len(rows) == 6 and {r["annotator"] for r in rows} == {"res1"}  # only the viewer's own


def test_app_restores_the_db_from_its_snapshot_repo(tmp_path: Path) -> None:
    """A Space restart: the DB file is gone, CIR_DB_REPO holds a snapshot, `import app` restores
    it before anything opens the DB (a folder stands in for the Hub dataset repo)."""
    import os
    import sqlite3
    import subprocess
    import sys

    from db.migrate import init_db
    from db.models import Annotator
    from db.sqlite import open_db as make_db
    from db.sqlite import session_factory
    from ui.settings import AppConfig

    db, repo = tmp_path / "ann.sqlite", tmp_path / "repo"
    eng = make_db(db)
    init_db(eng)
    with session_factory(eng)() as s:
        s.add(Annotator(name="kept"))
        s.commit()
    eng.dispose()
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "CIR_DB": str(db), "CIR_DB_REPO": f"file://{repo}", "CIR_DB_SNAPSHOT_EVERY": "3600"}
    run = lambda *cmd: subprocess.run([sys.executable, *cmd], cwd=root, env=env, capture_output=True,
                                      text=True, timeout=300)
    pushed = run("-m", "db.snapshot", "push", str(db))
    assert pushed.returncode == 0, pushed.stderr
    for f in tmp_path.glob("ann.sqlite*"):
        f.unlink()
    started = run("-c", "import app; assert app.persistence is not None")
    assert started.returncode == 0, started.stderr
    con = sqlite3.connect(db)
    assert con.execute("SELECT name FROM annotators").fetchall() == [("kept",)]
    con.close()
    # A Hub repo keeps the app online (HF_HUB_OFFLINE unset); a folder does not need it.
    assert AppConfig(db_repo="org/ann").uses_hub() and not AppConfig(db_repo=f"file://{repo}").uses_hub()


def test_guideline_examples_follow_the_world_truth(cir_engine) -> None:
    ex = annotate.guideline_examples(cir_engine, size=64)
    assert len(ex) == 1 + 6 and ex[0][1].startswith("Reference")
    labels = [c for _, c in ex[1:]]
    assert sum("the target" in c for c in labels) == 1
    assert any(c.startswith("Different character (") and c.endswith("· Edit satisfied") for c in labels)
    assert any("nothing changed" in c for c in labels)
    # every label names the look the world's gold identity is: body colour and hat
    from cir_core.world.spec import BODY_COLOURS, HATS

    ref_look = ex[0][1].split("(")[1].split(")")[0]
    for c in labels:
        colour, hat = c.split("(")[1].split(")")[0].split(" body, ")
        assert colour in BODY_COLOURS and hat in HATS
        assert c.startswith("Same") == (f"{colour} body, {hat}" == ref_look)
    assert annotate.guideline_examples(type("E", (), {"world": None})()) == []  # off the world: none


def test_next_pairs_are_rendered_ahead(svc, cir_engine) -> None:
    """The screen names the next pairs' items; the tab renders them in the background, so the
    next click finds its pictures as files (no rendering on the request path)."""
    import time

    st = svc.open("ahead", DEFAULT_SET)
    assert st.upcoming and st.task.item_id not in st.upcoming
    annotate.open_view(svc, cir_engine, "ahead", DEFAULT_SET)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(annotate.IMAGES.known(cir_engine, i) for i in st.upcoming):
        time.sleep(0.1)
    assert all(annotate.IMAGES.known(cir_engine, i) for i in st.upcoming)
    html = annotate.pair_html(*[annotate.IMAGES.path(cir_engine, i) for i in st.upcoming[:2]])
    assert html.count("<img") == 2 and "gradio_api/file=" in html
