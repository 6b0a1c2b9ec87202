"""Prompt templates (training/configs/itt_prompts.json) and strict parsing of a model's answer.

Placeholders in the user template are replaced literally ({caption}, {type_name},
{type_instruction}, {n_negatives}, {example}), so the JSON braces in a template need no escaping.
"""
from __future__ import annotations

import json
from pathlib import Path

from cir_core.errors import InputError
from cir_core.formats.itt import EDIT_TYPE_NAMES, EDIT_TYPES, MAX_NEGATIVES, norm_text
from cir_core.inputs import MAX_EDIT_CHARS, collapse_whitespace

DEFAULT_PROMPTS = Path(__file__).resolve().parents[1] / "configs" / "itt_prompts.json"
PLACEHOLDERS = ("{caption}", "{type_name}", "{type_instruction}", "{n_negatives}", "{example}")


class AnswerError(ValueError):
    """A model's answer is not the JSON object asked for (retried, then the job is skipped)."""


def load_prompts(path: str | Path | None = None) -> dict:
    """The template file, checked: version, system, user with {caption}, all five edit types."""
    path = Path(path) if path else DEFAULT_PROMPTS
    if not path.is_file():
        raise InputError(f"prompt file {str(path)!r} not found")
    try:
        p = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"prompt file {str(path)!r}: invalid JSON ({exc.msg}, line {exc.lineno})") from None
    for key in ("version", "system", "user"):
        if not isinstance(p.get(key), str) or not p[key].strip():
            raise InputError(f"prompt file {str(path)!r}: {key!r} must be non-empty text")
    if "{caption}" not in p["user"]:
        raise InputError(f"prompt file {str(path)!r}: the user template has no {{caption}} placeholder")
    types = p.get("edit_types")
    missing = [t for t in EDIT_TYPES if not isinstance(types, dict) or not isinstance(types.get(t), dict)
               or not isinstance(types[t].get("instruction"), str)]
    if missing:
        raise InputError(f"prompt file {str(path)!r}: edit_types lacks an 'instruction' for {', '.join(missing)}")
    return p


def messages(prompts: dict, caption: str, edit_type: str, n_negatives: int) -> list[dict]:
    """Chat messages asking for one edit of `edit_type` to `caption`."""
    t = prompts["edit_types"][edit_type]
    example = json.dumps(t["example"], ensure_ascii=False) if t.get("example") else "(none)"
    user = prompts["user"]
    for ph, val in zip(PLACEHOLDERS, (caption, EDIT_TYPE_NAMES[edit_type], t["instruction"],
                                      str(n_negatives), example)):
        user = user.replace(ph, val)
    return [{"role": "system", "content": prompts["system"]}, {"role": "user", "content": user}]


def _json_object(text: str) -> dict:
    text = text.strip()
    if text.startswith("```"):  # a fenced block despite JSON mode
        text = text.strip("`").removeprefix("json").strip()
    start = text.find("{")
    if start < 0:
        raise AnswerError(f"no JSON object in the answer: {text[:80]!r}")
    try:
        obj, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise AnswerError(f"invalid JSON in the answer ({exc.msg}): {text[:80]!r}") from None
    if not isinstance(obj, dict):
        raise AnswerError("the answer's JSON is not an object")
    return obj


def _field(obj: dict, key: str) -> str:
    v = obj.get(key)
    if not isinstance(v, str) or not collapse_whitespace(v):
        raise AnswerError(f"the answer's {key!r} is missing or not text: {v!r}")
    v = collapse_whitespace(v)
    if len(v) > MAX_EDIT_CHARS:
        raise AnswerError(f"the answer's {key!r} is {len(v)} characters long")
    return v


def parse_answer(text: str, source_caption: str) -> dict:
    """{edit, target_caption, negatives} from a model's answer; AnswerError if it is not usable.
    Negatives equal to the target or the source, or repeated, are dropped (the builder adds the
    source caption itself as the first negative)."""
    obj = _json_object(text)
    edit, target = _field(obj, "edit"), _field(obj, "target_caption")
    if norm_text(target) == norm_text(source_caption):
        raise AnswerError("the answer's target caption repeats the source caption")
    if norm_text(edit) == norm_text(target):
        raise AnswerError("the answer's edit is the target caption")
    negs = obj.get("negatives", [])
    if not isinstance(negs, list):
        raise AnswerError(f"the answer's 'negatives' is not a list: {negs!r}")
    keep, seen = [], {norm_text(target), norm_text(source_caption)}
    for n in negs:
        if not isinstance(n, str):
            raise AnswerError(f"a negative is not text: {n!r}")
        n = collapse_whitespace(n)
        if n and norm_text(n) not in seen and len(n) <= MAX_EDIT_CHARS:
            seen.add(norm_text(n))
            keep.append(n)
    return {"edit": edit, "target_caption": target, "negatives": keep[:MAX_NEGATIVES - 1]}
