"""Judgment export: rows, CSV/JSONL round trip, pseudonyms, per-annotator filter, CLI."""
from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path

import pytest
from _db_fixture import COMMENT, build

from cir_core.errors import InputError
from db.export import (
    FIELDS,
    export_rows,
    main,
    pseudonym,
    read_csv,
    read_jsonl,
    write_csv,
    write_jsonl,
)
from db.sqlite import open_db, session_factory


@pytest.fixture(scope="module")
def db_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("export") / "ann.sqlite")


def _rows(db_path: Path, annotator: str | None = None, salt: str | None = None) -> list[dict]:
    engine = open_db(db_path)
    try:
        with session_factory(engine)() as s:
            rows = export_rows(s, annotator, salt)
            assert not s.in_transaction()  # the write lock (BEGIN IMMEDIATE) is released
            return rows
    finally:
        engine.dispose()


def test_rows_content(db_path: Path) -> None:
    rows = _rows(db_path)
    assert len(rows) == 7 and all(tuple(r) == FIELDS for r in rows)
    keys = [(r["query_external_id"], r["item_id"], r["annotator"]) for r in rows]
    assert keys == sorted(keys)  # set, query, item order; ann1 judged before ann2 on q0/x
    first = rows[0]
    assert (first["query_set"], first["item_id"], first["annotator"]) == ("s", "x", "ann1")
    assert (first["identity"], first["edit"], first["comment"]) == ("yes", "yes", COMMENT)
    assert (first["time_spent_ms"], first["shown_position"]) == (1200, 1)
    skip = next(r for r in rows if r["status"] == "skipped")
    assert (skip["item_id"], skip["identity"], skip["edit"], skip["skip_reason"]) == (
        "w", None, None, "blurry")
    gold = next(r for r in rows if r["item_id"] == "u")
    assert (gold["gold_identity"], gold["gold_edit"]) == ("yes", "partial")
    for r in rows:
        for key in ("created_at", "updated_at"):
            assert datetime.fromisoformat(r[key]).utcoffset().total_seconds() == 0
            assert r[key].endswith("+00:00")
    assert isinstance(first["task_id"], int)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_round_trip(db_path: Path, tmp_path: Path, fmt: str) -> None:
    rows = _rows(db_path)
    path = tmp_path / f"j.{fmt}"
    (write_csv if fmt == "csv" else write_jsonl)(rows, path)
    back = (read_csv if fmt == "csv" else read_jsonl)(path)
    assert back == rows
    assert any(r["comment"] == COMMENT for r in back)  # comma, quote and newline survive


def test_csv_quotes_the_awkward_comment(db_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "j.csv"
    write_csv(_rows(db_path), path)
    raw = path.read_bytes().decode("utf-8")  # read_text would translate \r\n
    assert '"face hidden, ""maybe"" hers\nsecond line"' in raw
    assert raw.count("\r\n") == 8  # header + 7 records; the comment's own \n is inside quotes


@pytest.mark.parametrize("comment", ['=HYPERLINK("http://x.example","open")', "+1", "-2+3", "@SUM(A1)",
                                     "\tcmd", "\r=1", "'=1", "'quoted", "plain = fine"])
def test_csv_cells_never_start_a_formula(db_path: Path, tmp_path: Path, comment: str) -> None:
    """Issue 27: a comment starting with = (or + - @, tab, CR) would run as a formula in a
    spreadsheet; it is written behind an apostrophe, and read back exactly."""
    import csv

    rows = [{**r, "comment": comment} for r in _rows(db_path)]
    path = tmp_path / "j.csv"
    write_csv(rows, path)
    with open(path, encoding="utf-8", newline="") as f:
        cells = [r["comment"] for r in csv.DictReader(f)]
    for cell in cells:
        assert not cell.startswith(("=", "+", "-", "@", "\t", "\r"))
        assert cell == (comment if comment[0] not in "=+-@\t\r'" else "'" + comment)
    assert read_csv(path) == rows
    write_jsonl(rows, tmp_path / "j.jsonl")  # JSON is no spreadsheet: verbatim
    assert read_jsonl(tmp_path / "j.jsonl") == rows


def test_pseudonyms_stable_keyed_and_hide_the_name(db_path: Path, tmp_path: Path) -> None:
    rows = _rows(db_path, salt="s3cret")
    names = {r["annotator"] for r in rows}
    assert names == {pseudonym("ann1", "s3cret"), pseudonym("ann2", "s3cret")}
    assert all(len(n) == 12 and int(n, 16) >= 0 for n in names)
    assert _rows(db_path, salt="s3cret") == rows  # stable
    assert pseudonym("ann1", "other") != pseudonym("ann1", "s3cret")  # depends on the secret
    # Not a plain (unkeyed) hash anyone could recompute from a list of names.
    assert pseudonym("ann1", "s3cret") != hashlib.sha256(b"ann1").hexdigest()[:12]
    path = tmp_path / "p.jsonl"
    write_jsonl(rows, path)
    assert "ann1" not in path.read_text() and "ann2" not in path.read_text()
    with pytest.raises(InputError, match="salt"):
        _rows(db_path, salt="")


def test_annotator_filter(db_path: Path) -> None:
    own = _rows(db_path, annotator="ann2")
    assert [(r["item_id"], r["status"]) for r in own] == [("x", "answered"), ("w", "skipped")]
    assert {r["annotator"] for r in _rows(db_path, "ann2", "k")} == {pseudonym("ann2", "k")}
    with pytest.raises(InputError, match="no annotator named 'zed'"):
        _rows(db_path, annotator="zed")


def test_cli(db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "a.csv"
    assert main(["--db", str(db_path), "--format", "csv", "--out", str(out),
                 "--pseudonymise", "--salt", "x", "--annotator", "ann1"]) == 0
    rows = read_csv(out)
    assert len(rows) == 5 and {r["annotator"] for r in rows} == {pseudonym("ann1", "x")}
    assert "5 judgments" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--db", str(db_path), "--format", "csv", "--out", str(out), "--pseudonymise"])
    with pytest.raises(SystemExit):  # a salt alone would silently export real names
        main(["--db", str(db_path), "--format", "csv", "--out", str(out), "--salt", "x"])
    assert main(["--db", str(db_path), "--format", "jsonl", "--out", str(out),
                 "--annotator", "zed"]) == 2


def test_naive_timestamps_read_as_utc() -> None:
    from db.export import iso_utc

    assert iso_utc(datetime(2024, 5, 1, 12, 0)) == "2024-05-01T12:00:00.000000+00:00"
    assert iso_utc(datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)).endswith("+00:00")
    assert iso_utc(None) is None
