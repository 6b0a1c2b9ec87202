"""The output JSONL: resumable, one record per line, appended and flushed one line at a time.

A crash can only cut the last line short; `scan_output` drops that partial line (truncating the
file to its last newline) and returns the ids and (image, edit) pairs already written, so a rerun
skips them. Any other bad line is an error naming it: the file is not silently rewritten.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from cir_core.errors import InputError
from cir_core.fileio import loads_json
from cir_core.formats.itt import dedup_key, validate_record

FSYNC_EVERY = 100


@dataclass
class Existing:
    ids: set[str] = field(default_factory=set)
    pairs: set[tuple[str, str]] = field(default_factory=set)
    generators: set[tuple[str, str]] = field(default_factory=set)  # (mode, model)
    dropped_partial: bool = False


def scan_output(path: str | Path) -> Existing:
    """What an earlier run wrote to `path` (nothing if it does not exist)."""
    path, ex = Path(path), Existing()
    if not path.exists():
        return ex
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        with path.open("r+b") as f:
            f.truncate(keep)
        data, ex.dropped_partial = data[:keep], True
    for n, line in enumerate(data.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = validate_record(loads_json(line))
        except (json.JSONDecodeError, InputError) as exc:
            raise InputError(f"output {str(path)!r} line {n} is not a valid record ({exc}); fix or "
                             "remove it (--validate lists every problem), or write to a new --out") from None
        ex.ids.add(rec["id"])
        ex.pairs.add(dedup_key(rec["image_id"], rec["edit"]))
        ex.generators.add((rec["generator"]["mode"], rec["generator"]["model"]))
    return ex


class Writer:
    """Appends records, one `write` + flush per line, fsync every FSYNC_EVERY lines and on close."""

    def __init__(self, path: str | Path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.f = open(path, "a", encoding="utf-8")
        self.n = 0

    def write(self, rec: dict) -> None:
        self.f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self.f.flush()
        self.n += 1
        if self.n % FSYNC_EVERY == 0:
            os.fsync(self.f.fileno())

    def close(self) -> None:
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
