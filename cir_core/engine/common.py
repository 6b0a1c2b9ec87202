"""What every part of the engine (and the UI) shares: the request limits."""
from __future__ import annotations

from ..inputs import MAX_EDIT_CHARS, collapse_whitespace

MAX_TEXT_CHARS = MAX_EDIT_CHARS  # cir_core.inputs: shared with the CLIs
MAX_UPLOAD_PIXELS = 40_000_000  # checked from the header, before decoding (decompression bombs)
MAX_K = 50
MAX_STEPS = 10  # progression rows shown; the world's longest edits have 10 sentences


def normalise_text(text: str) -> str:
    """The key under which an edit matches a world query: what `check_edit_text` keeps."""
    return collapse_whitespace(str(text))
