"""Validation of user-typed inputs, shared by the app, the CLIs and the library entry points."""
from __future__ import annotations

from cir_core.errors import InputError

MAX_EDIT_CHARS = 2000  # ~20 long sentences; CLIP truncates at 77 tokens per sentence anyway


def collapse_whitespace(text: str) -> str:
    """Runs of whitespace (newlines included) as one space, ends stripped."""
    return " ".join(text.split())


def check_edit_text(text: object, max_chars: int = MAX_EDIT_CHARS) -> str:
    """The edit with whitespace collapsed; InputError if it is empty, not text, or too long."""
    if not isinstance(text, str):
        raise InputError(f"the edit must be text, got {type(text).__name__}")
    clean = collapse_whitespace(text)
    if not clean:
        raise InputError("the edit is empty: type what should change, e.g. 'Make the square blue.'")
    if len(clean) > max_chars:
        raise InputError(f"the edit is {len(clean)} characters long; the limit is {max_chars}")
    return clean
