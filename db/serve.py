"""A small JSON HTTP endpoint that writes judgments through the db layer (for stress tests).

    python -m db.serve --db FILE --port P [--host 127.0.0.1]

POST /judgment {"annotator_id", "task_id", "identity", "edit", optional "comment",
"time_spent_ms", "shown_position", "skip_reason"}: one transaction (upsert_judgment + commit);
the 200 reply is sent only after the commit returned. GET /health answers {"ok": true, "pid"}.
Errors: 400 bad input, 409 unknown annotator/task, 503 the DB failed (`kind`: busy — retry —,
disk_full, read_only, io_error, ...; see db/faults.py), 500 anything else.
Not the app's server and not authenticated: bind it to localhost.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from cir_core.fileio import loads_json
from db.faults import fault_kind
from db.judgments import upsert_judgment
from db.migrate import init_db
from db.sqlite import SYNCHRONOUS, open_db, session_factory

MAX_BODY = 64 * 1024
_INT_FIELDS = ("annotator_id", "task_id")
_FIELDS = {"annotator_id", "task_id", "identity", "edit", "comment", "time_spent_ms",
           "shown_position", "skip_reason"}
log = logging.getLogger("db.serve")


class BadRequest(ValueError):
    """The request body is not a valid judgment."""


def parse_judgment(body: bytes) -> dict[str, Any]:
    """The upsert_judgment keyword arguments in a request body; BadRequest names the problem."""
    try:
        data = loads_json(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BadRequest("body must be a JSON object")
    unknown = set(data) - _FIELDS
    if unknown:
        raise BadRequest(f"unknown fields: {sorted(unknown)}")
    for key in _INT_FIELDS:
        value = data.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise BadRequest(f"{key} must be an integer, got {value!r}")
    data.setdefault("identity", None)
    data.setdefault("edit", None)
    return data


class JudgmentServer(ThreadingHTTPServer):
    """One engine shared by every request thread; SQLite's write lock serialises the commits."""

    daemon_threads = True
    # 32 clients reconnecting at once after a restart overflow the default backlog of 5.
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], engine: Engine) -> None:
        super().__init__(address, Handler)
        self.sessions = session_factory(engine)


class Handler(BaseHTTPRequestHandler):
    server: JudgmentServer

    def _reply(self, code: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        if self.path == "/health":
            self._reply(200, {"ok": True, "pid": os.getpid()})
        else:
            self._reply(404, {"error": f"no such path: {self.path}"})

    def do_POST(self) -> None:  # noqa: N802
        if self.path != "/judgment":
            self._reply(404, {"error": f"no such path: {self.path}"})
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            self._reply(400, {"error": f"Content-Length must be 1..{MAX_BODY}"})
            return
        try:
            kwargs = parse_judgment(self.rfile.read(length))
            with self.server.sessions() as session:
                judgment = upsert_judgment(session, **kwargs)
                session.commit()
                reply = {"id": judgment.id, "status": judgment.status}
        except ValueError as exc:  # BadRequest, or upsert_judgment's own validation
            self._reply(400, {"error": str(exc)})
        except IntegrityError as exc:
            self._reply(409, {"error": f"rejected by the DB: {exc.orig}"})
        except (OperationalError, PoolTimeout) as exc:
            # Named for what it is (busy, disk full, read-only, I/O error: db.faults). 503 for all
            # of them: not acknowledged. (After an I/O error the write may still show up once the
            # file is recovered, as a reply lost to a crash would; the same payload again is a
            # no-op then.) Busy is worth a retry at once.
            kind = fault_kind(exc)
            self._reply(503, {"error": f"{kind}: {getattr(exc, 'orig', None) or exc}", "kind": kind,
                              "retry": kind == "busy"})
        except Exception as exc:  # the client must get an answer, never a silent drop
            log.exception("judgment failed")
            self._reply(500, {"error": f"{type(exc).__name__}: {exc}"})
        else:
            self._reply(200, reply)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("%s %s", self.address_string(), format % args)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m db.serve", description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, help="SQLite file (created and migrated if needed)")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--verbose", action="store_true", help="log every request")
    ap.add_argument("--synchronous", choices=SYNCHRONOUS, default="FULL",
                    help="SQLite's synchronous setting (NORMAL only to show what FULL buys: "
                    "bench/fault_annotation.py)")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if a.verbose else logging.INFO, stream=sys.stderr)
    engine = open_db(a.db, synchronous=a.synchronous)
    init_db(engine)
    server = JudgmentServer((a.host, a.port), engine)
    print(f"serving {a.db} on http://{a.host}:{server.server_address[1]} (pid {os.getpid()})",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
