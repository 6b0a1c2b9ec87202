"""Sentence splitting for multi-sentence edits (PACE's steps, the app's per-sentence progression).

Rules, in order (a small rule set beats a model here: edits are short, typed, and English):
- A blank line, or a new line starting with a bullet ("-", "*", "•") or an enumerator ("1.", "2)"),
  always ends a sentence; any other run of whitespace (single newlines included) is one space.
- A run of ".", "!" or "?" (plus closing quotes/brackets) followed by whitespace or the end ends a
  sentence, except after an abbreviation: titles ("Mr.", "Dr.", "St.", …) and Latin/list forms
  ("e.g.", "i.e.", "vs.", "approx.") never end one; single-letter initials ("J. Smith") never do
  either; "etc.", months and dotted acronyms ("U.S.") only when the next word is capitalised.
- A decimal ("3.5") never splits: a terminator must be followed by whitespace.
- Pieces with no letter or digit ("!!", "…") and bare enumerators ("1.") are dropped; a missing
  final period is fine (the last piece is a sentence); one long sentence comes back as one.
"""
from __future__ import annotations

import re

# Never end a sentence: a name or a number follows them.
TITLES = frozenset("mr mrs ms dr prof st sr jr mt ft rev gen col capt lt sgt gov sen rep hon".split())
NEVER = TITLES | frozenset("e.g i.e eg ie vs cf approx ca vol pp esp incl dept".split())
# End a sentence only when the next word is capitalised ("…, dogs, etc. Then make it red."); some
# are also plain words ("say no.", "a fig.") that end sentences before a capital.
IF_CAPITAL = frozenset("etc inc ltd co corp no nos fig figs ed est "
                       "jan feb mar apr jun jul aug sep sept oct nov dec".split())

_TERMINATOR = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s|$)")
_HARD_BREAK = re.compile(r"\n[ \t]*\n\s*|\n[ \t]*(?=(?:[-*•·]|\(?\d{1,2}[.)])\s)")
_BULLET = re.compile(r"^(?:[-*•·]|\(?\d{1,2}[.)])\s+")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")
_ENUMERATOR = re.compile(r"^\(?\d{1,2}[.)]$")


def _ends_sentence(text: str, start: int, end: int, mark: str) -> bool:
    """Whether the terminator text[start:end] ends a sentence."""
    if not mark.startswith("."):
        return True  # "!" and "?" always do
    if mark.startswith(".."):  # an ellipsis
        return True
    m = _WORD_BEFORE.search(text[:start])
    if not m:
        return True
    word = m.group(1).lower().rstrip(".")
    before = text[m.start(1) - 1] if m.start(1) else " "
    if not before.isspace() and before not in "(\"'“‘":
        return True  # glued to a digit or symbol ("3.5kg."): a unit, not an abbreviation
    nxt = text[end:].lstrip()[:1]
    if word in NEVER or (len(word) == 1 and m.group(1).isupper()):  # an initial: "J. Smith"
        return False
    if word in IF_CAPITAL or "." in word:
        return nxt.isupper()
    return True


def _split_block(block: str) -> list[str]:
    block = " ".join(block.split())
    out, start = [], 0
    for m in _TERMINATOR.finditer(block):
        if _ends_sentence(block, m.start(), m.end(), m.group()):
            out.append(block[start:m.end()])
            start = m.end()
    out.append(block[start:])
    return out


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, whitespace-normalised, terminators kept; [] for blank text."""
    if not text or not text.strip():
        return []
    pieces: list[str] = []
    for block in _HARD_BREAK.split(text.replace("\r\n", "\n").replace("\r", "\n")):
        block = _BULLET.sub("", block.strip())
        pieces += _split_block(block)
    out = []
    for p in (p.strip() for p in pieces):
        if p and any(c.isalnum() for c in p) and not _ENUMERATOR.match(p):
            out.append(p)
    return out
