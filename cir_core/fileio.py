"""Small file helpers shared by the gallery, the ITT builder, the Hub tools and the DB snapshots."""
from __future__ import annotations

import csv
import errno
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def loads_json(text: str | bytes) -> Any:
    """`json.loads`, except that JSON nested past the interpreter's recursion limit raises
    ValueError like any other malformed JSON (json's decoder recurses once per level: a 200k-deep
    array used to escape every caller's `except ValueError` as a RecursionError)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def jsonl_objects(text: str, where: str, error: type[Exception],
                  bad_json: str = "not valid JSON") -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of JSONL `text` as (line number, dict), blank lines skipped. A line that is
    not JSON, or not an object, raises `error` naming `where` and the line (`bad_json`: the words
    a reader's messages already use)."""
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = loads_json(line)
        except ValueError as exc:
            raise error(f"{where} line {n}: {bad_json} ({getattr(exc, 'msg', exc)})") from None
        if not isinstance(row, dict):
            raise error(f"{where} line {n}: expected a JSON object")
        rows.append((n, row))
    return rows


def read_table(path: Path, error: type[Exception]) -> tuple[list[tuple[int, dict[str, Any]]], list[str] | None]:
    """(rows as (line number, dict), CSV header or None for JSONL) of a JSONL or CSV file:
    JSONL if the first non-blank character is '{'. Bad JSON lines raise `error` naming the line."""
    text = path.read_text(encoding="utf-8-sig")
    if text.lstrip().startswith("{"):
        return jsonl_objects(text, f"manifest {str(path)!r}", error, bad_json="invalid JSON"), None
    reader = csv.DictReader(text.splitlines())
    rows = [(reader.line_num, dict(row)) for row in reader]
    return rows, list(reader.fieldnames or [])


def atomic_write_path(path: Path, write: Callable[[Path], None], durable: bool = True) -> None:
    """`write(tmp)` writes a temp file beside `path`, unique to this call (for writers that take
    a path: safetensors, FAISS, a numpy memmap, a file copy); it is flushed to disk (`durable`;
    False for caches that a crash may lose) and renamed onto `path` with os.replace, so readers
    see the old or the new file, whole, even with several threads writing the same path. A write
    that fails leaves no temp file behind."""
    path = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        if durable:
            fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: Path, write: Callable[[Any], None], binary: bool, durable: bool = True,
                 newline: str | None = None) -> None:
    """`write(f)` fills an open file (binary or UTF-8 text; `newline` as `open`'s, "" for the
    csv module) that replaces `path` whole (`atomic_write_path`'s temp file + os.replace)."""

    def to(tmp: Path) -> None:
        if binary:
            with open(tmp, "wb") as f:
                write(f)
        else:
            with open(tmp, "w", encoding="utf-8", newline=newline) as f:
                write(f)

    atomic_write_path(path, to, durable)


def atomic_folder(path: Path, write: Callable[[Path], None], durable: bool = True) -> None:
    """`write(tmp)` fills a new folder beside `path`, which then takes `path`'s place in one step:
    at every instant `path` is the whole old folder or the whole new one, also for a kill or a
    power cut mid-swap (Linux's renameat2 RENAME_EXCHANGE swaps the two names atomically; a
    folder that did not exist is renamed into place). The files are flushed first (`durable`).
    A `write` that fails leaves `path` as it was and no temp folder. Where the exchange is missing
    (another OS, a file system without it) the old folder is renamed aside first, and
    `folder_or_aside` finds it if a crash comes between the two renames."""
    path = Path(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.new-", dir=path.parent))
    try:
        write(tmp)
        if durable:
            for f in tmp.rglob("*"):
                if f.is_file():
                    fsync_path(f)
            _fsync_dir(tmp)
        if not path.exists():
            os.rename(tmp, path)
        elif _exchange(tmp, path):
            shutil.rmtree(tmp)  # the old folder, under the temp name now
        else:
            aside = path.with_name(f".{path.name}.old")
            shutil.rmtree(aside, ignore_errors=True)
            os.rename(path, aside)
            os.rename(tmp, path)
            shutil.rmtree(aside)
        if durable:
            _fsync_dir(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def folder_or_aside(path: Path) -> Path | None:
    """`path` if it is a folder, else the old folder `atomic_folder`'s fallback set aside just
    before a crash (None if neither)."""
    path = Path(path)
    if path.is_dir():
        return path
    aside = path.with_name(f".{path.name}.old")
    return aside if aside.is_dir() else None


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: Path) -> None:
    """Flush a written file's data to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# A text cell a spreadsheet would run as a formula (OWASP's list: = + - @, tab, carriage return)
# is written with a leading apostrophe, and so is one that starts with an apostrophe, so the rule
# is reversible: a reader drops exactly one leading apostrophe (`csv_uncell`).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "'")


def csv_cell(value: Any) -> Any:
    """A CSV cell: None empty; text a spreadsheet would run as a formula behind an apostrophe."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def csv_uncell(text: str) -> str:
    """What `csv_cell` wrote for a text cell, read back exactly."""
    return text[1:] if text.startswith("'") else text

