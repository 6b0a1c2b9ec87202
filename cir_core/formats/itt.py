"""ITT (image–text–text) triplets, this project's training format for PACT-style methods: the record
(its keys, checks and id), the training reader (`read_train`, `data=itt:FILE`) and the writer of a
split in it. `training.itt` builds such files from an image–caption manifest (docs/ITT.md).

    itt.jsonl        one record per line: {"id", "image", "image_id", "source_caption", "edit_type",
                     "edit", "target_caption", "negatives", "generator": {"mode", "model", ...}, "ops"?}
    captions.jsonl   (beside it, when written here) the image–caption manifest: {"path", "id", "caption"}

`image` is a path relative to the file's folder (or the trainer's `image_root`). Edit types are
DiCE-CIR's five (seed 001, §III-B), named as the generated world names them
(`cir_core.world.data.EDIT_TYPES` minus its sixth, "long", which PACE's long-form data cover).
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from cir_core.errors import InputError
from cir_core.fileio import loads_json
from cir_core.inputs import MAX_EDIT_CHARS, collapse_whitespace

from .common import FormatError, Triplet
from .registry import Format, register_format
from .writing import Folder, Query, Split

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


def read_train(path: Path, image_root: str | None = None) -> list[Triplet]:
    """The training reader (`data=itt:FILE`): every record validated, its image found (relative to
    `image_root`, default the file's folder)."""
    if not path.is_file():
        raise FormatError(f"ITT file {str(path)!r} not found")
    root = Path(image_root).expanduser() if image_root else path.parent
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = validate_record(loads_json(line))
        except (ValueError, InputError) as exc:
            raise FormatError(f"{path} line {n}: {exc}") from None
        image = (root / rec["image"]).resolve()
        if not image.is_file():
            raise FormatError(f"{path} line {n} (id {rec['id']}): image {str(image)!r} not found "
                              f"(image_root={str(root)!r})")
        out.append(Triplet(str(image), rec["image_id"], rec["edit"], rec["source_caption"],
                           rec["target_caption"], negatives=tuple(rec["negatives"]), edit_type=rec["edit_type"]))
    if not out:
        raise FormatError(f"{path}: no ITT records")
    return out


def record_of(q: Query, image: str, image_id: str, generator: dict[str, str]) -> tuple[dict | None, str]:
    """(the ITT record of `q`, "") or (None, why it cannot be one): the checks of `validate_record`
    applied before writing (a negative that is the target or repeats another is dropped)."""
    if q.edit_type not in EDIT_TYPES:
        return None, f"edit type {q.edit_type} is not an ITT type"
    target = norm_text(q.target_caption)
    if target == norm_text(q.ref_caption):
        return None, "target caption equals the reference caption"
    if norm_text(q.text) == target:
        return None, "edit equals the target caption"
    if max(len(q.text), len(q.ref_caption), len(q.target_caption)) > MAX_EDIT_CHARS:
        return None, "text longer than the ITT limit"
    negs: list[str] = []
    for n in q.negatives:
        if norm_text(n) != target and norm_text(n) not in {norm_text(x) for x in negs}:
            negs.append(n)
    return {"id": make_id(image_id, q.ref_caption, q.edit_type), "image": image, "image_id": image_id,
            "source_caption": q.ref_caption, "edit_type": q.edit_type, "edit": q.text,
            "target_caption": q.target_caption, "negatives": negs[:MAX_NEGATIVES],
            "generator": generator, "ops": list(q.ops)}, ""


def write(split: Split, out: Folder) -> dict[str, Any]:
    """The manifest of the queries' reference pictures (`images/<picture id>.png`, the reference
    caption) and one record per query that can be one (the others counted by reason)."""
    manifest, records, jobs = [], [], []
    skipped: dict[str, int] = {}
    generator = {**split.generator, "split": split.name}
    for q in split.queries:
        pic = split.pictures[q.reference]
        rel = f"images/{pic.id}.png"
        manifest.append({"path": rel, "id": pic.id, "caption": q.ref_caption})
        jobs.append((rel, pic.draw))
        out.items[pic.id] = pic.source
        rec, why = record_of(q, rel, pic.id, generator)
        if rec is None:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        records.append(rec)
        out.queries[rec["id"]] = q.source
    out.jsonl("captions.jsonl", manifest)
    out.jsonl("itt.jsonl", records)
    out.images(jobs, "itt")
    out.notes.append("captions.jsonl: the image-caption manifest (reference images, their captions); "
                     "itt.jsonl: one ITT record per query of an ITT edit type")
    return {"split_name": split.name, "queries": len(split.queries), "records": len(records), "skipped": skipped}


register_format(Format("itt", "ITT triplets: source image, edit, target caption, negatives (JSON lines)",
                       read_train=read_train, write=write, write_train=write, gallery=False, order=0))
