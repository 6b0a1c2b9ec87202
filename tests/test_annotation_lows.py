"""Issue 42's lows, each as it was found: a damaged or empty DB at start, an unknown migration
revision, JSON nested past the recursion limit (a gallery manifest, a snapshot's latest.json, a
checkpoint's config.json), a tampered snapshot carrying a trigger, names a person cannot tell
apart, a NUL in a comment, two tabs of one annotator, the annotation-only banner, the temporary
folders after a shutdown, and the load bench's reading of the saved answer."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from _snapshot_fakes import CountingRemote, make_db, pushed_file
from sqlalchemy import select

from cir_core.errors import CIRError
from db import migrate
from db.judgments import StaleAnswer
from db.models import Judgment, Query, QuerySet, Task
from db.service import AnnotationService
from db.sqlite import EmptyDatabaseFile
from db.users import load_users, name_problem
from ui import annotate

DEEP = "[" * 200_000 + "]" * 200_000


def _service(path: Path, n: int = 6) -> AnnotationService:
    svc = AnnotationService(path)
    with svc.Session() as s:
        qs = QuerySet(name="s", source="test", overlap=2, pool_k=5)
        q = Query(query_set=qs, external_id="q0", reference_id="ref0", edit_text="make it red")
        s.add_all([qs, q, *(Task(query=q, item_id=f"item{i}") for i in range(n))])
        s.commit()
    return svc


class _NoImages:
    def row_of(self, item_id: str) -> int:
        raise KeyError(item_id)


# -- the database at start ----------------------------------------------------------------------------

@pytest.mark.parametrize("content", [b"garbage, not SQLite " * 50, b""])
def test_a_db_that_cannot_open_says_so_on_every_click_and_is_opened_once_a_minute(tmp_path, monkeypatch,
                                                                                  content) -> None:
    """Every click used to say "Something went wrong... press N" and re-run the migration."""
    path = tmp_path / "ann.sqlite"
    path.write_bytes(content)
    opened = []
    real = annotate.AnnotationService
    monkeypatch.setattr(annotate, "AnnotationService", lambda *a, **k: opened.append(1) or real(*a, **k))
    holder = annotate.ServiceHolder(str(path))
    click = annotate.guard(lambda: annotate.move_view(holder.get(), _NoImages(), "alice", {}, "next"),
                           lambda v: [v.status], 5)
    with pytest.warns(UserWarning, match="cannot be opened"):  # the toast, outside a request: a warning
        first, second = click()[0], click()[0]
    assert first == second and "cannot be opened" in first and "Something went wrong" not in first
    assert ("empty file" if not content else "not a usable annotation database") in first.replace("\\", "")
    assert len(opened) == 1 and path.read_bytes() == content  # tried once; the file as it was


def test_an_empty_db_file_is_refused_not_turned_into_a_campaign(tmp_path) -> None:
    empty = tmp_path / "ann.sqlite"
    empty.write_bytes(b"")
    with pytest.raises(EmptyDatabaseFile, match="0 bytes"):
        AnnotationService(empty)
    assert empty.stat().st_size == 0
    new = tmp_path / "new.sqlite"  # a missing file is still a new database
    AnnotationService(new).close()
    assert new.stat().st_size > 0


def test_migrate_names_an_unknown_revision_without_a_traceback(tmp_path, capsys) -> None:
    db = str(tmp_path / "m.sqlite")
    assert migrate.main(["--db", db, "upgrade", "--revision", "zzz"]) == 1
    err = capsys.readouterr().err
    assert "cannot migrate to 'zzz'" in err and "Traceback" not in err and "0001" in err
    assert not Path(db).exists()  # the failed first run left no empty file behind
    assert migrate.main(["--db", db, "upgrade"]) == 0
    con = sqlite3.connect(db)
    con.execute("UPDATE alembic_version SET version_num = '9999'")  # written by a newer workbench
    con.commit()
    con.close()
    capsys.readouterr()
    assert migrate.main(["--db", db, "upgrade"]) == 1
    assert "'9999'" in capsys.readouterr().err
    with pytest.raises(migrate.SchemaError, match="newer workbench"):
        AnnotationService(db)


# -- JSON past the recursion limit ----------------------------------------------------------------------

def test_deeply_nested_json_is_an_error_naming_the_file(tmp_path) -> None:
    from cir_core.checkpoint import CheckpointError, read_checkpoint
    from cir_core.gallery import Gallery
    from db.snapshot.core import SnapshotError
    from db.snapshot.persist import read_latest

    manifest = tmp_path / "gallery.jsonl"
    manifest.write_text('{"path": "a.png"}\n{"path": ' + DEEP + "}\n")
    with pytest.raises(CIRError, match="line 2"):
        Gallery.from_manifest(manifest)
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "config.json").write_text(DEEP)
    with pytest.raises(CheckpointError, match="config.json"):
        read_checkpoint(ck)
    remote = CountingRemote(tmp_path / "repo")
    db = make_db(tmp_path / "ann.sqlite")
    pushed_file(db, remote, tmp_path)
    remote.download("latest.json").write_text(DEEP)
    with pytest.raises(SnapshotError, match="latest.json"):
        read_latest(remote)


# -- a tampered snapshot ----------------------------------------------------------------------------------

def test_a_snapshot_with_a_trigger_is_refused_even_when_its_checksums_agree(tmp_path) -> None:
    """Whoever can write the repo's latest.json can make the checksums match any file; a trigger
    restored with it would run on every answer."""
    from cir_core.fileio import sha256_file
    from db.snapshot.core import SnapshotIntegrityError
    from db.snapshot.persist import LATEST, restore

    remote = CountingRemote(tmp_path / "repo")
    db = make_db(tmp_path / "ann.sqlite")
    remote_file = pushed_file(db, remote, tmp_path)
    con = sqlite3.connect(remote_file)
    con.execute("CREATE TRIGGER steal AFTER INSERT ON events BEGIN UPDATE events SET note = 'x'; END")
    con.commit()
    con.close()
    pointer = json.loads(remote.download(LATEST).read_text())
    pointer.update(sha256=sha256_file(remote_file), size=remote_file.stat().st_size)
    remote.download(LATEST).write_text(json.dumps(pointer))
    with pytest.raises(SnapshotIntegrityError, match="trigger 'steal'"):
        restore(tmp_path / "restored.sqlite", remote)
    assert not (tmp_path / "restored.sqlite").exists()


# -- names -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["a" * 65, "al\u202eice", "ali\u200bce", "\u0430lice", "bob smith", "<img>", "-x"])
def test_names_a_person_could_not_tell_apart_are_refused_at_start(tmp_path, name) -> None:
    """A 201-character name signed in and then had every click refused; bidi, zero-width and
    homoglyph names were shown raw, looking like someone else."""
    users = tmp_path / "users.txt"
    users.write_text(f"alice:pw\n{name}:pw\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"users.txt:2: user name .* is not allowed"):
        load_users(users)
    assert name_problem(name) is not None
    svc = _service(tmp_path / "n.sqlite")
    with pytest.raises(PermissionError, match="not allowed"):
        svc.open(name, "s")


def test_ordinary_names_sign_in(tmp_path) -> None:
    users = tmp_path / "users.txt"
    users.write_text("alice:pw\nbob.smith@lab:pw\nann_2+x:sha256:" + "0" * 64 + "\n")
    assert set(load_users(users)) == {"alice", "bob.smith@lab", "ann_2+x"}
    assert name_problem("hf:some-user") is None


# -- a NUL in a comment -----------------------------------------------------------------------------------

def test_a_control_character_in_a_comment_is_named_and_nothing_is_saved(tmp_path) -> None:
    """On PostgreSQL a NUL got only "database refused the request"; it is now refused before
    the database on every backend (tests/test_postgres.py runs it there too)."""
    svc = _service(tmp_path / "c.sqlite")
    st = annotate.open_view(svc, _NoImages(), "alice", "s").state
    annotate.choose_view(svc, _NoImages(), "alice", st, "identity", "yes", "fine\x00")
    pending = annotate.choose_view(svc, _NoImages(), "alice", st, "identity", "yes", "ok").state
    run = annotate.guard(lambda: annotate.choose_view(svc, _NoImages(), "alice", pending, "edit", "no", "bad\x00"),
                         lambda v: [v.status], 5)
    with pytest.warns(UserWarning, match="U\\+0000"):  # the toast, outside a request: a warning
        msg = run()[0].replace("\\", "")
    assert "U+0000" in msg and "comment" in msg
    with svc.ReadSession() as s:
        assert s.scalar(select(Judgment.id).limit(1)) is None


# -- two tabs ----------------------------------------------------------------------------------------------

def test_two_tabs_of_one_annotator_do_not_overwrite_each_other(tmp_path) -> None:
    svc = _service(tmp_path / "t.sqlite")
    one = annotate.open_view(svc, _NoImages(), "alice", "s").state
    two = annotate.open_view(svc, _NoImages(), "alice", "s").state
    assert one["task"] == two["task"] and one["revision"] is None
    for kind, value in (("identity", "yes"), ("edit", "yes")):
        one = annotate.choose_view(svc, _NoImages(), "alice", one, kind, value, "").state
    two = annotate.choose_view(svc, _NoImages(), "alice", two, "identity", "no", "").state
    with pytest.raises(StaleAnswer, match="another tab"):
        annotate.choose_view(svc, _NoImages(), "alice", two, "edit", "no", "")
    with svc.ReadSession() as s:
        row = s.execute(select(Judgment.identity, Judgment.edit, Judgment.time_spent_ms)).one()
    assert row[:2] == ("yes", "yes")
    # The same answer again from the other tab (a retried click) is a no-op, not a conflict.
    svc.answer("alice", "s", two["task"], "yes", "yes", expected=None)
    # Back in the first tab shows the saved answer, and changing it there is allowed.
    back = annotate.move_view(svc, _NoImages(), "alice", one, "back").state
    assert back["revision"] is not None
    for kind, value in (("identity", "no"), ("edit", "partial")):
        back = annotate.choose_view(svc, _NoImages(), "alice", back, kind, value, "").state
    with svc.ReadSession() as s:
        assert s.execute(select(Judgment.identity, Judgment.edit)).one() == ("no", "partial")


# -- the annotation-only banner ----------------------------------------------------------------------------

def test_the_annotation_only_banner_names_no_method() -> None:
    from _cir_fakes import fake_methods_engine

    from cir_core.methods import method_label
    from ui import banner

    eng = fake_methods_engine()
    labels = [method_label(n) for n in eng.methods.status()]
    assert any(label in banner(eng) for label in labels)
    only = banner(eng, annotation_only=True)
    assert not any(label in only for label in labels) and "Gallery" in only


# -- temporary folders -----------------------------------------------------------------------------------

def test_gradios_folder_goes_with_the_apps_root_at_shutdown_and_after_a_kill(tmp_path) -> None:
    """Uploads and figure previews lived in a shared /tmp/gradio and outlived every shutdown."""
    import os
    import subprocess
    import sys

    from ui.tempfiles import PREFIX, TempDirs, sweep_orphans

    dirs = TempDirs(parent=tmp_path, sweeper=False, serve=False)
    upload = dirs.gradio_dir() / "abc" / "upload.png"
    upload.parent.mkdir()
    upload.write_bytes(b"x")
    assert dirs.sweep(now=1e12) == 0 and upload.exists()  # the TTL sweep leaves Gradio's folder to Gradio
    dirs.close()
    assert not upload.exists()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    orphan = tmp_path / f"{PREFIX}{dead}-x" / "gradio" / "h"
    orphan.mkdir(parents=True)
    (orphan / "left.png").write_bytes(b"x")
    assert sweep_orphans(tmp_path) == 1 and not orphan.exists()
    assert os.getpid() != int(dead)


def test_the_app_points_gradio_at_its_own_folder(tmp_path) -> None:
    import os

    from _cir_fakes import N_QUERIES, fake_methods_engine

    from ui import build_demo
    from ui.settings import AppConfig
    from ui.tempfiles import TEMP

    build_demo(AppConfig(world_queries=N_QUERIES, db=str(tmp_path / "a.sqlite")), engine=fake_methods_engine())
    assert Path(os.environ["GRADIO_TEMP_DIR"]).is_relative_to(TEMP.root)


# -- the load bench -------------------------------------------------------------------------------------------

def test_the_load_bench_reads_the_saved_answer_as_the_status_words_it() -> None:
    """bench/load_annotation.py reported FAIL ('Back showed a wrong answer') on every run: its
    parser read 'yes / partial' while the status says the buttons' words."""
    from bench.load_clients import ANSWER, answer_codes

    for ident, _, _ in annotate.IDENTITY:
        for edit, _, _ in annotate.EDIT:
            status = f"pair #3 · your answer: **{annotate.answer_words('answered', ident, edit)}** (changing it …)"
            m = ANSWER.search(status)
            assert m and answer_codes(m.group(1)) == f"{ident} / {edit}"
    m = ANSWER.search(f"pair #2 · your answer: **{annotate.answer_words('skipped', None, None)}**")
    assert m and answer_codes(m.group(1)) == "skipped"
