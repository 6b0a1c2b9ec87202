"""CIReVL's offline rewriter on the generated world: what its LLM does (caption + instruction →
"Edited Description"), by rules over the world's closed grammar.

A caption in the world's reference form (`cir_core.world.language.caption`: who, where, facing,
background, objects) is parsed back into a scene; each sentence of the instruction is looked up
in the table of every phrasing `language.edit_text` can produce (built once by enumerating every
atomic edit), applied with `language.apply_edit`, and the edited scene is written out again in
the same grammar. A sentence the table does not hold, or an edit that does not fit the captioned
scene (the caption was retrieved, and may be wrong), is appended as it was written; when nothing
could be applied the instruction itself is the description, as CIReVL's code falls back to the
instruction when the LLM gives no "Edited Description". An empty instruction leaves the scene as
captioned (q_∅ is the caption, written in the same phrasing as q). The film world's language is
not covered: its edits all fall back (docs/METHODS.md, CIReVL).
"""
from __future__ import annotations

import random
import re
from functools import lru_cache
from typing import Sequence

from cir_core.text import split_sentences
from cir_core.world.language import AT, BG_PHRASE, SIZE_WORD, Edit, apply_edit, caption, edit_text
from cir_core.world.spec import BACKGROUNDS, COLOURS, FACINGS, NAMES, POSITIONS, SHAPES, SIZES, Character, Obj, Scene

RULESET = "cirevl-world-rules-v1"
_WHO = {"a character", "someone", "a figure"}
_PLACE = {v: k for k, v in AT.items()}
_BG = {v: k for k, v in BG_PHRASE.items()}
_SIZE = {v[0]: k for k, v in SIZE_WORD.items()}
_AT = "|".join(map(re.escape, AT.values()))
_CAPTION = re.compile(rf"^(?P<who>.+?) (?:standing )?(?P<at>{_AT}),? facing (?P<face>left|right) in "
                      rf"(?P<bg>{'|'.join(map(re.escape, BG_PHRASE.values()))}), with (?P<objs>.+?)\.?$")
_OBJ = re.compile(rf"^an? (?P<size>{'|'.join(_SIZE)}) (?P<colour>\w+) (?P<shape>\w+) (?P<at>{_AT})$")


def parse_caption(text: str) -> tuple[Scene, bool] | None:
    """(the scene a reference-form caption describes, whether it names the character), or None
    when `text` is not in that form. An unnamed character gets identity 0 (never written out)."""
    m = _CAPTION.match(" ".join(str(text).split()))
    if m is None:
        return None
    who = m["who"][:1].lower() + m["who"][1:]
    named = who not in _WHO
    if named and who.capitalize() not in NAMES:
        return None
    objs = []
    for part in re.split(r", | and ", m["objs"]):
        o = _OBJ.match(part)
        if o is None or o["colour"] not in COLOURS or o["shape"] not in SHAPES:
            return None
        objs.append(Obj(o["shape"], o["colour"], _SIZE[o["size"]], _PLACE[o["at"]]))
    ident = NAMES.index(who.capitalize()) if named else 0
    scene = Scene(_BG[m["bg"]], Character(ident, _PLACE[m["at"]], m["face"]), ()).with_objects(objs)
    try:
        scene.validate()
    except ValueError:
        return None
    return scene, named


def describe(scene: Scene, named: bool) -> str:
    """The scene in the reference-caption grammar, one fixed phrasing (q and q_∅ share it)."""
    return caption(scene, random.Random(0), name=named)


class _Pick:
    """Stands in for `random.Random` in `edit_text`: `choice` returns the i-th option."""

    def __init__(self, i: int):
        self.i = i

    def choice(self, options: Sequence[str]) -> str:
        return options[min(self.i, len(options) - 1)]


def _norm(sentence: str) -> str:
    return " ".join(sentence.lower().split()).rstrip(".!").strip()


def every_edit() -> list[Edit]:
    """Every atomic edit of the world's vocabulary (scene-independent)."""
    out: list[Edit] = []
    for t in SHAPES:
        out += [Edit("colour", t, c) for c in COLOURS] + [Edit("size", t, s) for s in SIZES]
        out += [Edit("shape", t, s) for s in SHAPES if s != t] + [Edit("move", t, p) for p in POSITIONS]
        out += [Edit("remove", t)]
        out += [Edit("add", None, Obj(t, c, s, p)) for c in COLOURS for s in SIZES for p in POSITIONS]
    out += [Edit("char_move", None, p) for p in POSITIONS] + [Edit("char_face", None, f) for f in FACINGS]
    return out + [Edit("background", None, b) for b in BACKGROUNDS]


@lru_cache(maxsize=1)
def phrase_table() -> dict[str, tuple[Edit, ...]]:
    """Every phrasing `edit_text` can write (imperative and terse), normalised → the edits it may
    mean (a terse "with a small red star" names no position: every free one is a candidate)."""
    table: dict[str, list[Edit]] = {}
    for e in every_edit():
        for short in (False, True):
            for i in range(6):
                edits = table.setdefault(_norm(edit_text(e, _Pick(i), short)), [])
                if e not in edits:
                    edits.append(e)
    return {k: tuple(v) for k, v in table.items()}


def sentence_edits(sentence: str) -> list[tuple[Edit, ...]] | None:
    """The edits one sentence asks for (one candidate tuple per clause), or None: the whole
    sentence, else two clauses joined by "and" (the world's "two" queries)."""
    table, s = phrase_table(), _norm(sentence)
    if s in table:
        return [table[s]]
    for m in re.finditer(r" and ", s):
        a, b = s[:m.start()], s[m.end():]
        if a in table and b in table:
            return [table[a], table[b]]
    return None


class RulesRewriter:
    """`rewrite(caption, instruction) -> description` by the world's rules (module docstring)."""

    info = {"mode": "rules", "ruleset": RULESET}

    def rewrite(self, text: str, instruction: str) -> str:
        parsed = parse_caption(text)
        if parsed is None:
            return instruction if instruction.strip() else text
        scene, named = parsed
        left, applied = [], False
        for sentence in split_sentences(instruction):
            clauses = sentence_edits(sentence)
            if clauses is None:
                left.append(sentence)
                continue
            for candidates in clauses:
                done = next((s for s in (_try(scene, e) for e in candidates) if s is not None), None)
                if done is None:
                    left.append(sentence)
                    break
                scene, applied = done, True
        if left and not applied:
            return instruction
        return " ".join([describe(scene, named), *left])


def _try(scene: Scene, e: Edit) -> Scene | None:
    try:
        return apply_edit(scene, e)
    except ValueError:
        return None
