"""What every format's readers share: reading annotation files with errors that name the file, the
record and the key (`FormatError`), and `Triplet`, the one training example every training reader
returns."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cir_core.errors import InputError
from cir_core.fileio import jsonl_objects, loads_json


class FormatError(InputError):
    """A file of a data set is missing or malformed; the message names the file, the record and
    the key. (`cir_core.benchmarks.BenchmarkError` is this class: a benchmark's bad files and bad
    options are one kind of error.)"""


def read_json(path: Path) -> Any:
    """Parsed JSON of `path`, or FormatError naming the file."""
    if not path.is_file():
        raise FormatError(f"{path}: file not found")
    try:
        return loads_json(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError(f"{path}: not valid JSON ({e})") from None


def read_jsonl_lines(path: Path) -> list[tuple[int, dict]]:
    """(line number, row) of a JSON-lines file, blank lines skipped: errors name the file's own line."""
    if not path.is_file():
        raise FormatError(f"{path}: file not found")
    return jsonl_objects(path.read_text(encoding="utf-8"), str(path), FormatError)


def read_jsonl(path: Path) -> list[dict]:
    """Rows of a JSON-lines file (blank lines skipped), each a JSON object."""
    return [row for _, row in read_jsonl_lines(path)]


def need(entry: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """entry[key], checked to be of `kind`; FormatError naming `where` and the key otherwise."""
    if not isinstance(entry, dict):
        raise FormatError(f"{where}: expected a JSON object, got {type(entry).__name__}")
    if key not in entry:
        raise FormatError(f"{where}: missing key {key!r}")
    v = entry[key]
    if isinstance(v, bool) or not isinstance(v, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise FormatError(f"{where}: key {key!r} should be {names}, got {type(v).__name__}")
    return v


def check_files(paths: Iterable[str], what: str) -> None:
    """FormatError listing the first missing image files, if any."""
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        shown = ", ".join(missing[:3]) + (f" (+{len(missing) - 3} more)" if len(missing) > 3 else "")
        raise FormatError(f"{what}: {len(missing)} image file(s) not found: {shown}")


@dataclass(frozen=True)
class Triplet:
    """One training example, what every format's training reader returns. Captions or target
    images may be absent, as the source allows."""

    ref_image: str  # a path
    ref_key: str  # the reference image's id (equal ids: the same image)
    edit: str
    ref_caption: str | None = None
    target_caption: str | None = None
    target_image: str | None = None
    target_key: str | None = None
    negatives: tuple[str, ...] = ()
    edit_type: str | None = None
