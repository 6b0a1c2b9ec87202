"""The ITT record: one (source image, edit, target caption, negatives) training triplet.

Edit types are DiCE-CIR's five (seed 001, §III-B), named as the generated world names them
(`cir_core.world.data.EDIT_TYPES` minus its sixth, "long", which PACE's long-form data cover).
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from cir_core.errors import InputError
from cir_core.inputs import MAX_EDIT_CHARS, collapse_whitespace
from cir_core.fileio import loads_json

EDIT_TYPES = ("attribute", "spatial", "scene", "two", "short")
EDIT_TYPE_NAMES = {  # the paper's names, used in prompts and docs
    "attribute": "fine-grained attribute",
    "spatial": "spatial or viewpoint",
    "scene": "strong scene change",
    "two": "compositional two change",
    "short": "retrieval short",
}
GENERATOR_MODES = ("template", "endpoint", "hf")
MAX_NEGATIVES = 8
REQUIRED = ("id", "image", "image_id", "source_caption", "edit_type", "edit", "target_caption",
            "negatives", "generator")
OPTIONAL = ("ops",)
_ID = re.compile(r"^[0-9a-f]{16}$")


def norm_text(text: str) -> str:
    """Comparison key of a caption or edit: case, whitespace and final punctuation ignored."""
    return collapse_whitespace(text).casefold().rstrip(" .!?;,")


def make_id(image_id: str, source_caption: str, edit_type: str) -> str:
    """Stable id of one (image, caption, edit type) job: known before generation, so a rerun
    can skip it without calling a model."""
    key = "\x1f".join((image_id, collapse_whitespace(source_caption), edit_type))
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:16]


def dedup_key(image_id: str, edit: str) -> tuple[str, str]:
    """The same edit of the same image is one training signal, whatever the caption."""
    return image_id, norm_text(edit)


def _text(rec: dict, key: str) -> str:
    v = rec[key]
    if not isinstance(v, str) or not v.strip():
        raise InputError(f"{key!r} must be non-empty text, got {v!r}")
    if len(v) > MAX_EDIT_CHARS:
        raise InputError(f"{key!r} is {len(v)} characters long; the limit is {MAX_EDIT_CHARS}")
    return v


def validate_record(rec: Any) -> dict:
    """Return `rec` if it is a well-formed ITT record; InputError naming the field otherwise."""
    if not isinstance(rec, dict):
        raise InputError(f"a record must be a JSON object, got {type(rec).__name__}")
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        raise InputError(f"missing field(s) {', '.join(missing)}")
    unknown = sorted(set(rec) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(unknown)}")
    for key in ("image", "image_id", "source_caption", "edit", "target_caption"):
        _text(rec, key)
    if rec["edit_type"] not in EDIT_TYPES:
        raise InputError(f"'edit_type' must be one of {', '.join(EDIT_TYPES)}, got {rec['edit_type']!r}")
    if not isinstance(rec["id"], str) or not _ID.match(rec["id"]):
        raise InputError(f"'id' must be 16 lowercase hex digits, got {rec['id']!r}")
    want = make_id(rec["image_id"], rec["source_caption"], rec["edit_type"])
    if rec["id"] != want:
        raise InputError(f"'id' {rec['id']!r} does not match image_id/source_caption/edit_type ({want})")
    target = norm_text(rec["target_caption"])
    if target == norm_text(rec["source_caption"]):
        raise InputError("'target_caption' is the source caption: the edit changed nothing")
    if norm_text(rec["edit"]) == target:
        raise InputError("'edit' is the target caption, not a modification")
    negs = rec["negatives"]
    if not isinstance(negs, list) or len(negs) > MAX_NEGATIVES:
        raise InputError(f"'negatives' must be a list of at most {MAX_NEGATIVES} captions")
    seen: set[str] = set()
    for i, n in enumerate(negs):
        if not isinstance(n, str) or not n.strip():
            raise InputError(f"'negatives'[{i}] must be non-empty text, got {n!r}")
        if norm_text(n) == target:
            raise InputError(f"'negatives'[{i}] is the target caption")
        if norm_text(n) in seen:
            raise InputError(f"'negatives'[{i}] repeats an earlier negative")
        seen.add(norm_text(n))
    gen = rec["generator"]
    if not isinstance(gen, dict) or gen.get("mode") not in GENERATOR_MODES:
        raise InputError(f"'generator' must be an object whose 'mode' is one of {', '.join(GENERATOR_MODES)}")
    if not isinstance(gen.get("model"), str) or not gen["model"]:
        raise InputError("'generator'.'model' must name the model or rule set")
    ops = rec.get("ops", [])
    if not isinstance(ops, list) or not all(isinstance(o, str) and o for o in ops):
        raise InputError("'ops' must be a list of operation names")
    return rec


def validate_file(path: str | Path, max_errors: int = 20) -> tuple[int, list[str]]:
    """(number of valid records, error messages naming the line) for a JSONL file of records;
    duplicate ids and duplicate (image, edit) pairs are errors too."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"ITT file {str(path)!r} not found")
    ok, errors = 0, []
    ids: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = validate_record(loads_json(line))
                if rec["id"] in ids:
                    raise InputError(f"duplicate id {rec['id']}")
                key = dedup_key(rec["image_id"], rec["edit"])
                if key in pairs:
                    raise InputError(f"duplicate (image, edit) {key}")
            except json.JSONDecodeError as exc:
                errors.append(f"line {n}: invalid JSON ({exc.msg})")
            except InputError as exc:
                errors.append(f"line {n}: {exc}")
            else:
                ok += 1
                ids.add(rec["id"])
                pairs.add(key)
            if len(errors) >= max_errors:
                errors.append(f"stopped after {max_errors} errors")
                break
    return ok, errors
