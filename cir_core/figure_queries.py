"""The query list of a figure (`cir_core.figures`): world query ids, gallery references with an
edit, and image files only under a root the caller names (see `resolve_image_path`)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .errors import InputError

MAX_ENTRIES = 200  # a figure holds far fewer; a longer list is a mistake or an attack
MAX_FIELD = 2000  # characters in one id, path or edit text
MAX_DEPTH = 8  # JSON nesting: {"queries": [{...}]} is 3; json.loads recurses once per level
PATHS_REFUSED = ("'reference_path' (an image file) is not accepted here: name a gallery image "
                 "with 'reference', a world query with 'query_id', or use the Compare tab's upload")


def resolve_image_path(path: str, image_root: str | Path | None) -> Path:
    """The file `path` names under `image_root` (relative paths are relative to it). InputError,
    the same whether the file exists or not, when there is no root or the path leaves it (`..`,
    an absolute path elsewhere, a symlink pointing out)."""
    if image_root is None:
        raise InputError(PATHS_REFUSED)
    root = Path(os.path.realpath(image_root))
    raw = str(path)
    if not raw or "\x00" in raw or len(raw) > MAX_FIELD:
        raise InputError("reference_path must name an image under the image root")
    real = Path(os.path.realpath(root / raw))  # an absolute `raw` replaces root here
    if real != root and root not in real.parents:
        raise InputError(f"reference_path {raw!r} is not under the image root {str(root)!r}")
    return real


def _text_field(e: dict, key: str, i: int) -> str:
    v = e[key]
    if not isinstance(v, (str, int)) or isinstance(v, bool):
        raise InputError(f"query #{i + 1}: {key!r} must be text, got {type(v).__name__}")
    v = str(v)
    if len(v) > MAX_FIELD:
        raise InputError(f"query #{i + 1}: {key!r} is longer than {MAX_FIELD} characters")
    return v


def _check_depth(raw: str) -> None:
    """InputError when JSON text nests deeper than MAX_DEPTH (json.loads would recurse until
    Python's limit and raise RecursionError), counting brackets outside strings."""
    depth, in_str, esc = 0, False, False
    for ch in raw:
        if in_str:
            esc, in_str = (False, True) if esc else (ch == "\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise InputError(f"the query list nests deeper than {MAX_DEPTH} levels: expected a "
                                 "list of ids or of {\"query_id\"/\"reference\", \"text\"} objects")
        elif ch in "]}":
            depth -= 1


def parse_entries(spec: Any, image_root: str | Path | None = None) -> list[dict]:
    """Normalise a query list: ids, JSON text, the exported JSON, or a list of entry dicts.

    `reference_path` entries are accepted only with an `image_root` and only under it (see
    `resolve_image_path`); the returned entry keeps the path as written."""
    if isinstance(spec, (str, bytes)):
        raw = spec.decode() if isinstance(spec, bytes) else spec
        raw = raw.strip()
        if not raw:
            raise InputError("no queries given: list world query ids (test-00010, …) or paste a JSON list")
        if raw[0] in "[{":
            _check_depth(raw)
            try:
                spec = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InputError(f"the query list is not valid JSON: {exc.msg} (line {exc.lineno})") from None
        else:
            spec = [s for s in raw.replace(",", " ").split() if s]
    if isinstance(spec, dict):
        spec = spec.get("queries", [])
    if not isinstance(spec, list) or not spec:
        raise InputError("the query list is empty (expected a JSON list, or {\"queries\": [...]})")
    if len(spec) > MAX_ENTRIES:
        raise InputError(f"{len(spec)} queries: at most {MAX_ENTRIES} in one list")
    out = []
    for i, e in enumerate(spec):
        if isinstance(e, str):
            e = {"query_id": e}
        if not isinstance(e, dict):
            raise InputError(f"query #{i + 1} is {type(e).__name__}; expected an id or an object")
        if "query_id" in e:
            out.append({"query_id": _text_field(e, "query_id", i)})
        elif "reference" in e or "reference_path" in e:
            key = "reference" if "reference" in e else "reference_path"
            text = _text_field(e, "text", i) if "text" in e else ""
            if not text.strip():
                raise InputError(f"query #{i + 1} has a {key} but no edit 'text'")
            value = _text_field(e, key, i)
            if key == "reference_path":
                try:
                    resolve_image_path(value, image_root)
                except InputError as exc:
                    raise InputError(f"query #{i + 1}: {exc}") from None
            out.append({key: value, "text": text})
        else:
            raise InputError(f"query #{i + 1} needs 'query_id', or 'reference'/'reference_path' + 'text'")
    return out
