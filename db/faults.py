"""What a failed database call means for the person who clicked: named from the driver's own
error code (SQLite's result code, PostgreSQL's SQLSTATE), each kind with what to do.

    kind = fault_kind(exc)           # "busy", "disk_full", "read_only", "io_error", ...
    what, todo = FAULTS[kind]

`DBFault` is what the annotation service raises when the database failed under a call: the
kind, whether the call carried an answer, and if so whether the answer is in the database after
all (`saved`: read back after the failure; None when that read failed too), so nobody is told
"nothing was lost" unless it was checked.
"""
from __future__ import annotations

import sqlite3
from typing import Optional

from sqlalchemy.exc import DBAPIError, IntegrityError, ProgrammingError
from sqlalchemy.exc import TimeoutError as PoolTimeout

# kind -> (what happened, what the annotator should do). The organiser reads the server log,
# where the driver's own message is logged beside the kind.
FAULTS: dict[str, tuple[str, str]] = {
    "busy": ("The annotation database is busy: other saves held it for more than 5 s.",
             "Press the key again in a moment."),
    "disk_full": ("The server's disk is full: the annotation database cannot store anything more.",
                  "Stop and tell the organiser (the server needs free disk space); press the key "
                  "again once they say it is fixed."),
    "read_only": ("The annotation database is read-only on the server (its file, folder or disk "
                  "cannot be written, or a disk error made the system stop writing to it).",
                  "Stop and tell the organiser; press the key again once they say it is fixed."),
    "io_error": ("The server's disk failed to read or write the annotation database (an I/O error).",
                 "Stop and tell the organiser: the disk and the database file need checking "
                 "before anyone goes on."),
    "corrupt": ("The annotation database file is damaged (SQLite reports it malformed).",
                "Stop and tell the organiser (a snapshot can be restored: python -m db.snapshot "
                "restore)."),
    "unavailable": ("The annotation database cannot be reached (the file cannot be opened, or "
                    "the database server does not answer).",
                    "Try again in a minute; if it goes on, tell the organiser."),
    "error": ("The annotation database refused the request (the server log names the error).",
              "Press N to reload your current pair; if it happens again, tell the organiser."),
}

# SQLite primary result codes (the low byte of an extended code): https://sqlite.org/rescode.html
_SQLITE = {5: "busy", 6: "busy", 13: "disk_full", 8: "read_only", 3: "read_only", 10: "io_error",
           11: "corrupt", 26: "corrupt", 14: "unavailable"}
# Older drivers without `sqlite_errorcode`: SQLite's own messages for those codes.
_SQLITE_TEXT = (("database is locked", "busy"), ("database table is locked", "busy"),
                ("database or disk is full", "disk_full"), ("readonly database", "read_only"),
                ("disk I/O error", "io_error"), ("malformed", "corrupt"),
                ("file is not a database", "corrupt"), ("unable to open database", "unavailable"))
# PostgreSQL SQLSTATEs (https://www.postgresql.org/docs/current/errcodes-appendix.html).
_PG = {"53100": "disk_full", "25006": "read_only", "58030": "io_error", "40001": "busy",
       "40P01": "busy", "55P03": "busy", "57014": "busy", "XX001": "corrupt", "XX002": "corrupt",
       "57P01": "unavailable", "57P02": "unavailable", "57P03": "unavailable", "53300": "busy"}


def fault_kind(exc: BaseException) -> str:
    """One of FAULTS' keys for a database exception (SQLAlchemy's, or the driver's own)."""
    if isinstance(exc, PoolTimeout):
        return "busy"  # every pooled connection in use for the pool's timeout
    orig = getattr(exc, "orig", None) or exc
    if isinstance(orig, sqlite3.Error):
        code = getattr(orig, "sqlite_errorcode", None)
        if isinstance(code, int) and (code & 0xFF) in _SQLITE:
            return _SQLITE[code & 0xFF]
        text = str(orig)
        return next((kind for needle, kind in _SQLITE_TEXT if needle in text), "error")
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if isinstance(state, str):
        if state in _PG:
            return _PG[state]
        if state.startswith("08"):  # connection exceptions
            return "unavailable"
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return "unavailable"
    return "error"


def is_fault(exc: BaseException) -> bool:
    """A database failure (busy, disk, connection, ...) rather than a bug in a statement or a
    refused value (constraint violations and SQL errors stay exceptions of their own)."""
    return isinstance(exc, PoolTimeout) or (
        isinstance(exc, DBAPIError) and not isinstance(exc, (IntegrityError, ProgrammingError)))


class DBFault(Exception):
    """The database failed under a call: `kind` (FAULTS' key); `writing`: the call carried an
    answer; `saved`: whether that answer is stored after all (read back after the failure;
    None: the read failed too, or nothing was to be saved)."""

    def __init__(self, kind: str, cause: BaseException, writing: bool = False,
                 saved: Optional[bool] = None):
        super().__init__(f"{kind}: {getattr(cause, 'orig', None) or cause}")
        self.kind, self.cause, self.writing, self.saved = kind, cause, writing, saved

    def message(self) -> str:
        return describe(self.kind, self.saved, self.writing)


def describe(kind: str, saved: Optional[bool] = None, writing: bool = True) -> str:
    """The message for the annotator: what happened, whether their answer is stored (only what
    was checked), and what to do."""
    what, todo = FAULTS.get(kind, FAULTS["error"])
    if not writing:
        status = "This click carried no answer to save."
    elif saved is True:
        status = "Your answer is in the database all the same (read back after the error)."
    elif saved is False:
        status = ("Your answer is not in the database (read back after the error): it is still on "
                  "screen, to be given again.")
    else:
        status = ("Whether your answer was saved could not be checked (the database could not be "
                  "read either): once this is fixed, press N; the pair comes back if it was not.")
    return f"{what} {status} {todo}"
