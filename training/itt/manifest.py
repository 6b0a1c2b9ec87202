"""Image–caption manifests: JSONL or CSV rows with an image (`path` and/or `id`) and a `caption`.

The layout matches gallery manifests (`cir_core.gallery.Gallery.from_manifest`): JSONL if the first
non-blank character is '{', else CSV with a header; relative paths are relative to the manifest's
folder. Any bad row stops the run with an InputError naming the file and line, before any model
call or write.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cir_core.errors import InputError
from cir_core.fileio import read_table
from cir_core.inputs import MAX_EDIT_CHARS, collapse_whitespace


@dataclass(frozen=True)
class Source:
    """One manifest row: the image as written (`image`), its id, and its caption."""
    line: int
    image: str
    image_id: str
    caption: str


def _rows(path: Path) -> list[tuple[int, dict]]:
    rows, cols = read_table(path, InputError)
    if cols is None:
        return rows
    if "caption" not in cols or not ({"path", "id"} & set(cols)):
        raise InputError(f"manifest {str(path)!r} line 1: CSV header needs 'caption' and 'path' "
                         f"or 'id' columns, got {cols}")
    for n, row in rows:
        if None in row:  # more cells than header columns
            raise InputError(f"manifest {str(path)!r} line {n}: more cells than header columns")
    return rows


def read_manifest(path: str | Path, check_images: bool = True) -> list[Source]:
    """Every row of the manifest, validated. With `check_images`, each `path` must be a file.
    Exact repeats of an (image, caption) row are kept once."""
    mpath = Path(path).expanduser()
    if not mpath.is_file():
        raise InputError(f"manifest {str(mpath)!r} not found")
    out: list[Source] = []
    seen: set[tuple[str, str]] = set()
    for n, row in _rows(mpath):
        where = f"manifest {str(mpath)!r} line {n}"
        p, id_, cap = row.get("path"), row.get("id"), row.get("caption")
        for key, v in (("path", p), ("id", id_)):
            if v is not None and not isinstance(v, (str, int)):
                raise InputError(f"{where}: {key!r} must be text, got {type(v).__name__}")
        p = str(p).strip() if p not in (None, "") else ""
        id_ = str(id_).strip() if id_ not in (None, "") else ""
        if not p and not id_:
            raise InputError(f"{where}: no 'path' or 'id' for the image")
        if not isinstance(cap, str) or not collapse_whitespace(cap):
            raise InputError(f"{where}: 'caption' must be non-empty text, got {cap!r}")
        cap = collapse_whitespace(cap)
        if len(cap) > MAX_EDIT_CHARS:
            raise InputError(f"{where}: caption is {len(cap)} characters long; the limit is {MAX_EDIT_CHARS}")
        if p and check_images:
            f = Path(p).expanduser()
            f = f if f.is_absolute() else mpath.parent / f
            if not f.is_file():
                raise InputError(f"{where}: image file {str(f)!r} not found "
                                 "(paths are relative to the manifest's folder; --no-check-images skips this)")
        src = Source(n, p or id_, id_ or p, cap)
        if (src.image_id, cap) not in seen:
            seen.add((src.image_id, cap))
            out.append(src)
    if not out:
        raise InputError(f"manifest {str(mpath)!r} has no rows")
    return out
