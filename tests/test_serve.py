"""db.serve in-process: a judgment is committed before the 200, bad input gets 400/409 and
changes nothing."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from db.serve import JudgmentServer
from db.sqlite import open_db
from db.stress import request, seed_db


@pytest.fixture()
def served(tmp_path: Path):
    db = tmp_path / "s.sqlite"
    ((ann, tasks),) = seed_db(db, clients=1, per_client=2)
    engine = open_db(db)
    server = JudgmentServer(("127.0.0.1", 0), engine)
    th = threading.Thread(target=server.serve_forever, daemon=True)
    th.start()
    yield server.server_address[1], engine, ann, tasks
    server.shutdown()
    server.server_close()
    engine.dispose()


def _post(port: int, payload: object) -> tuple[int, dict]:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    status, reply = request(port, "POST", "/judgment", body, timeout=10)
    return status, json.loads(reply)


def _rows(engine) -> list[tuple]:
    with engine.connect() as c:
        rows = c.execute(text("SELECT task_id, identity, edit, comment FROM judgments")).all()
        c.rollback()  # a read holds the write lock under BEGIN IMMEDIATE
    return [tuple(r) for r in rows]


def test_answer_then_revise(served) -> None:
    port, engine, ann, (t0, _) = served
    status, reply = _post(port, {"annotator_id": ann, "task_id": t0, "identity": "yes",
                                 "edit": "partial", "comment": "first"})
    assert (status, reply["status"]) == (200, "answered")
    assert _rows(engine) == [(t0, "yes", "partial", "first")]  # committed when the reply came
    status, _ = _post(port, {"annotator_id": ann, "task_id": t0, "identity": "no", "edit": "no"})
    assert status == 200
    assert _rows(engine) == [(t0, "no", "no", None)]


@pytest.mark.parametrize("payload, code, msg", [
    (b"{not json", 400, "not JSON"),
    ([1, 2], 400, "JSON object"),
    ({"annotator_id": "1", "task_id": 1}, 400, "annotator_id must be an integer"),
    ({"annotator_id": 1, "task_id": 1, "identity": "maybe", "edit": "yes"}, 400, "identity"),
    ({"annotator_id": 1, "task_id": 1, "identity": "yes", "edit": "yes", "who": 1}, 400, "unknown"),
    ({"annotator_id": 1, "task_id": 99999, "identity": "yes", "edit": "yes"}, 409, "rejected"),
])
def test_bad_input_changes_nothing(served, payload: object, code: int, msg: str) -> None:
    port, engine, _, _ = served
    status, reply = _post(port, payload)
    assert status == code and msg in reply["error"]
    assert _rows(engine) == []


def test_health_and_unknown_path(served) -> None:
    port = served[0]
    status, body = request(port, "GET", "/health", None, timeout=10)
    assert status == 200 and json.loads(body)["ok"] is True
    assert request(port, "GET", "/nope", None, timeout=10)[0] == 404
