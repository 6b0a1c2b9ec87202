"""A Compare request, resolved in one place: `CompareRequest` holds what a caller sent (the tab's
widgets, the JSON API, a permalink, a notebook), `admit` turns it into what the engine runs — k
and λ clamped to their ranges, the scoring named, the edit cut at its limit at a word, the
methods checked — with a note for everything it changed, and `Engine.run` answers it. The UI
handlers only render the result.

    req = CompareRequest(reference_id="test/000000", edit="Make the square blue.", k=1000)
    result = engine.run(admit(req))           # result.notes: "k = 1000 is outside 1–50: 50 was used."
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import InputError
from ..inputs import MAX_EDIT_CHARS
from ..search import DEFAULT_LAMBDA
from .common import MAX_K

SCORINGS = ("cosine", "chord")
DEFAULT_K = 8
MAX_ID = 500  # characters of a reference id read from a request
MAX_SENT = 100_000  # characters of an edit read from a request; past MAX_EDIT_CHARS it is cut, with a note
NO_REFERENCE = "Choose a reference first: click a gallery image, upload one, or pick an example query."


@dataclass(frozen=True)
class CompareRequest:
    """What a caller asked, as sent: any of these may be None, the wrong type, out of range."""

    reference_id: Any = None  # a gallery item id
    upload: str | None = None  # a server path the caller has vetted (ui.uploads), which wins over the id
    edit: Any = ""
    k: Any = DEFAULT_K
    scoring: Any = "cosine"
    lam: Any = None  # None: each method's own λ; a number: one λ for every method
    methods: Any = None  # names, a list or comma-separated; None: the engine's columns and baseline
    where: str = ""  # how the values were sent, for the notes ("in the link")


@dataclass(frozen=True)
class Admitted:
    """A request the engine can run: every value in range, and what admission changed (`notes`)."""

    reference_id: str | None
    upload: str | None
    edit: str
    k: int
    scoring: str
    lam: float | None
    methods: tuple[str, ...] | None
    notes: tuple[str, ...] = field(default_factory=tuple)


def _num(x: float) -> str:
    return f"{x:g}"


def noted_number(value: Any, default: float, lo: float, hi: float, name: str,
                 integer: bool = False) -> tuple[float, str | None]:
    """(`value` as a number in [lo, hi] — `default` when it is none — and a note when that is not
    what was sent: "k = 1000 is outside 1–50: 50 was used."). None takes the default silently."""
    f = math.nan
    if not isinstance(value, bool):
        try:
            f = float(value)
        except (TypeError, ValueError, OverflowError):
            f = math.nan
    used = default if not math.isfinite(f) else min(max(f, lo), hi)
    if integer:
        used = int(round(used))
    if value is None:
        return used, None
    if not math.isfinite(f):
        why = "is not a number"
    elif not lo <= f <= hi:
        why = f"is outside {_num(lo)}–{_num(hi)}"
    elif f != used:
        why = "is not a whole number"
    else:
        return used, None
    shown = (value if isinstance(value, str) else repr(value))[:40]
    return used, f"{name} = {shown} {why}: {_num(used)} was used."


def cut_edit(text: str, limit: int = MAX_EDIT_CHARS) -> tuple[str, str | None]:
    """(the edit cut to `limit` characters at a word boundary, a note saying so) — or (text, None).
    Counted as `cir_core.inputs.check_edit_text` counts (runs of whitespace are one space)."""
    n = len(" ".join(text.split()))
    if n <= limit:
        return text, None
    cut = text[:limit]  # collapsing whitespace only shortens, so this fits
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space > limit * 3 // 4:
        cut = cut[:space]
    cut = cut.rstrip()
    tail = " ".join(cut.split()[-4:])
    return cut, (f"The edit is {n:,} characters; the limit is {limit:,}: only its first "
                 f"{len(' '.join(cut.split())):,} (up to “…{tail}”) were used.")


def _text(value: Any, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


def admit(req: CompareRequest, registered: Sequence[str] | None = None) -> Admitted:
    """`req` as the engine runs it (module docstring). `InputError` for what no clamp can mend: a
    method that is not registered (`registered`: default, the method registry)."""
    where = f" ({req.where})" if req.where else ""
    k, k_note = noted_number(req.k, DEFAULT_K, 1, MAX_K, f"k{where}", integer=True)
    lam, lam_note = (None, None) if req.lam is None else noted_number(req.lam, DEFAULT_LAMBDA, 0.0, 1.0, f"λ{where}")
    scoring = str(req.scoring if isinstance(req.scoring, str) else "cosine").strip().lower()
    scoring = "chord" if scoring.startswith("chord") else "cosine"
    edit, cut = cut_edit(_text(req.edit, MAX_SENT))
    names = req.methods.split(",") if isinstance(req.methods, str) else req.methods
    methods = tuple(m.strip() for m in names or () if isinstance(m, str) and m.strip()) or None
    if methods is not None:
        if registered is None:
            from ..methods import list_methods

            registered = list_methods()
        unknown = [m for m in methods if m not in registered]
        if unknown:
            raise InputError(f"unknown method {unknown[0]!r}; registered: {', '.join(registered)}")
    ref = _text(req.reference_id, MAX_ID).strip() or None
    return Admitted(ref, req.upload or None, edit, int(k), scoring, lam, methods,
                    tuple(n for n in (k_note, lam_note, cut) if n))
