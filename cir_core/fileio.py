"""Small file helpers shared by the gallery, the ITT builder, the Hub tools and the DB snapshots."""
from __future__ import annotations

import csv
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_table(path: Path, error: type[Exception]) -> tuple[list[tuple[int, dict[str, Any]]], list[str] | None]:
    """(rows as (line number, dict), CSV header or None for JSONL) of a JSONL or CSV file:
    JSONL if the first non-blank character is '{'. Bad JSON lines raise `error` naming the line."""
    text = path.read_text(encoding="utf-8-sig")
    if text.lstrip().startswith("{"):
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"manifest {str(path)!r} line {n}: invalid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise error(f"manifest {str(path)!r} line {n}: expected a JSON object")
            rows.append((n, row))
        return rows, None
    reader = csv.DictReader(text.splitlines())
    rows = [(reader.line_num, dict(row)) for row in reader]
    return rows, list(reader.fieldnames or [])


def atomic_write_path(path: Path, write: Callable[[Path], None]) -> None:
    """`write(tmp)` writes a unique temp file beside `path` (for writers that take a path:
    safetensors, FAISS, a numpy memmap, a file copy); it is flushed to disk and renamed onto
    `path` with os.replace, so readers see the old or the new file, whole. A write that fails
    leaves no temp file behind."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: Path, write: Callable[[Any], None], binary: bool) -> None:
    """`write(f)` fills an open file (binary or UTF-8 text) that replaces `path` whole
    (`atomic_write_path`'s temp file + os.replace)."""

    def to(tmp: Path) -> None:
        with open(tmp, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            write(f)

    atomic_write_path(path, to)

