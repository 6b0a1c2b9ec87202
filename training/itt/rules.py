"""Template mode: edits and target captions from the source caption by rules, no model.

Each op finds something in the caption it can change (a colour word, an object noun, a relation,
a place) and returns a `Change`: the edit clause, a terse phrasing, the span replaced and its
replacement, and a wrong replacement of the same kind (a failed modification, used as a negative).
Ops that only append (add an object, a viewpoint, a place) are the fallback when nothing in the
caption fits, so every edit type applies to every caption. Op names follow the world's
(`cir_core.world.language`): colour, size, replace (the world's shape), add, remove, move, view,
background; plus material and count, which free captions have and the world does not.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable

from . import lexicon as L

RULESET = "rules-v1"


@dataclass(frozen=True)
class Change:
    op: str
    clause: str  # imperative, lower case: "make the car blue"
    terse: str  # retrieval-short: "blue car"
    old: str  # span of the caption replaced; "" appends `new`
    new: str
    alt: str | None  # a wrong `new` of the same kind (negative), or None


def a(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def _span(text: str, old: str) -> re.Match | None:
    left = r"(?<![\w-])" if old[:1].isalnum() else ""
    right = r"(?![\w-])" if old[-1:].isalnum() else ""
    return re.search(left + re.escape(old) + right, text, re.I)


def apply(text: str, old: str, new: str) -> str | None:
    """`text` with the first `old` replaced by `new` (or `new` appended when `old` is empty),
    capitalisation and a preceding a/an kept right; None if `old` is not in `text`."""
    if not old:
        body = text.rstrip()
        end = body[-1] if body[-1:] in ".!" else ""
        return body.rstrip(".!") + new + end
    m = _span(text, old)
    if m is None:
        return None
    rep = new[:1].upper() + new[1:] if m.start() == 0 and text[:1].isupper() else new
    head = text[:m.start()]
    art = re.search(r"(?<![\w-])(a|an|A|An) $", head)
    if art and rep[:1].isalpha():
        want = "an" if rep[:1].lower() in "aeiou" else "a"
        want = want.capitalize() if art.group(1)[0].isupper() else want
        head = head[:art.start(1)] + want + " "
    out = head + rep + text[m.end():]
    return re.sub(r"\s{2,}", " ", out).replace(" ,", ",").replace(" .", ".")


def _words(text: str, vocab) -> list[re.Match]:
    alts = "|".join(sorted(map(re.escape, vocab), key=len, reverse=True))
    return list(re.finditer(rf"(?<![\w-])({alts})(?![\w-])", text, re.I))


def _next_word(text: str, m: re.Match) -> str | None:
    """The noun an adjective describes: a known object within three words ("red double decker
    bus" -> bus), else the next word."""
    ahead = re.findall(r"[a-z]+", text[m.end():m.end() + 40].lower())[:3]
    known = [w for w in ahead if w in L.CATEGORY]
    if known:
        return known[0]
    n = re.match(r"\s+([a-z]+)", text[m.end():], re.I)
    return n.group(1).lower() if n and n.group(1).lower() not in ("and", "with", "in", "on", "of") else None


def _swap_adjective(op: str, values: dict[str, tuple[str, ...]]) -> Callable:
    def fn(cap: str, rng: random.Random) -> Change | None:
        found = _words(cap, values)
        if not found:
            return None
        m = rng.choice(found)
        old = m.group(1).lower()
        choices = [v for v in values[old] if v != old]
        new = rng.choice(choices)
        rest = [v for v in choices if v != new]
        noun = _next_word(cap, m)
        it = f"the {noun}" if noun else "it"
        clause = rng.choice([f"make {it} {new}", f"change {it} to {new}", f"{it} should be {new}"])
        terse = rng.choice([f"{new} {noun}", f"{a(new)} {noun} instead"]) if noun else f"{new} instead of {old}"
        return Change(op, clause, terse, m.group(1), new, rng.choice(rest) if rest else None)
    return fn


def _others(pool, old: str) -> tuple[str, ...]:
    return tuple(v for v in pool if v not in (old, {"gray": "grey", "grey": "gray"}.get(old)))


colour = _swap_adjective("colour", {c: _others(L.COLOURS, c) for c in L.COLOURS})
size = _swap_adjective("size", L.SIZE_SWAP)
material = _swap_adjective("material", {m: _others(L.MATERIALS, m) for m in L.MATERIALS})


def _plural(noun: str) -> str:
    return L.PLURAL.get(noun, noun + "s")


def count(cap: str, rng: random.Random) -> Change | None:
    nums = [m for m in _words(cap, L.NUMBERS) if _next_word(cap, m)]
    singles = [m for m in re.finditer(r"(?<![\w-])(an?) ([a-z]+)(?: (is|has|was)\b)?", cap, re.I)
               if m.group(2).lower() in L.CATEGORY]
    if not nums and not singles:
        return None
    m = rng.choice(nums + singles)
    if m in nums:
        old_n, noun = m.group(1).lower(), _next_word(cap, m)
        new_n, alt_n = rng.sample(_others(L.NUMBERS, old_n), 2)
        old, new, alt = f"{m.group(1)} {noun}", f"{new_n} {noun}", f"{alt_n} {noun}"
    else:
        noun, verb = m.group(2).lower(), (m.group(3) or "").lower()
        plural_verb = {"is": " are", "has": " have", "was": " were"}.get(verb, "")
        new_n, alt_n = rng.sample(L.NUMBERS[:3], 2)
        old = m.group(0)
        new, alt = (f"{n} {_plural(noun)}{plural_verb}" for n in (new_n, alt_n))
        noun = _plural(noun)
    clause = rng.choice([f"make it {new_n} {noun}", f"show {new_n} {noun} instead", f"there should be {new_n} {noun}"])
    return Change("count", clause, f"{new_n} {noun}", old, new, alt)


def replace(cap: str, rng: random.Random) -> Change | None:
    found = _words(cap, L.CATEGORY)
    if not found:
        return None
    old = rng.choice(found).group(1).lower()
    new, alt = rng.sample(_others(L.OBJECTS[L.CATEGORY[old]], old), 2)
    clause = rng.choice([f"replace the {old} with {a(new)}", f"turn the {old} into {a(new)}",
                         f"change the {old} to {a(new)}"])
    terse = rng.choice([f"{a(new)} instead of the {old}", f"{new} not {old}"])
    return Change("replace", clause, terse, old, new, alt)


def remove(cap: str, rng: random.Random) -> Change | None:
    nouns = "|".join(L.CATEGORY)
    pat = (rf",?\s+(?:with|and|next to|beside|near|holding|carrying)\s+(?:an?|the|two|some|his|her|its|their)"
           rf"\s+(?:[a-z]+\s+)?({nouns})s?(?![\w-])")
    found = [m for m in re.finditer(pat, cap, re.I) if m.start() > 0]
    if not found:
        return None
    m = rng.choice(found)
    o = m.group(1).lower()
    clause = rng.choice([f"remove the {o}", f"take away the {o}", f"get rid of the {o}"])
    return Change("remove", clause, rng.choice([f"no {o}", f"without the {o}"]), m.group(0), "", None)


def add(cap: str, rng: random.Random) -> Change | None:
    present = {m.group(1).lower() for m in _words(cap, L.CATEGORY)}
    obj, alt = rng.sample([o for o in L.ADDABLE if o not in present], 2)
    subj = _words(cap, L.CATEGORY)
    it = f" next to the {subj[0].group(1).lower()}" if subj else ""
    verbs = ["add", "put", "include"] if it else ["add", "include"]  # "put a dog." needs a place
    clause = f"{rng.choice(verbs)} {a(obj)}{it}"
    return Change("add", clause, rng.choice([f"with {a(obj)}", f"plus {a(obj)}"]), "",
                  f", with {a(obj)} nearby", f", with {a(alt)} nearby")


def move(cap: str, rng: random.Random) -> Change | None:
    sides = [m for m in re.finditer(r"(?<=the )(left|right)(?![\w-])|(left|right)(?= side| of)", cap, re.I)]
    rels = _words(cap, L.RELATIONS)
    if not sides and not rels:
        return None
    m = rng.choice(sides + rels)
    old = m.group(0).lower()
    if m in sides:
        new = L.SIDES[old]
        clause = rng.choice([f"move it to the {new} side", f"put it on the {new} instead of the {old}",
                             f"mirror it so it is on the {new}"])
        return Change("move", clause, f"on the {new}", m.group(0), new, None)
    new, *rest = rng.sample(L.RELATIONS[old], len(L.RELATIONS[old]))
    obj = re.match(r"\s+((?:the|a|an) [a-z]+)", cap[m.end():], re.I)
    what = f" {obj.group(1)}" if obj else ""
    clause = rng.choice([f"put it {new}{what} instead of {old} it" if obj else f"put it {new} instead of {old}",
                         f"have it {new}{what} rather than {old}"])
    return Change("move", clause, f"{new}{what}", m.group(0), new, rest[0] if rest else None)


def view(cap: str, rng: random.Random) -> Change | None:
    if _words(cap, L.VIEW_WORDS):
        return None  # rewriting an existing viewpoint phrase needs grammar the rules lack
    new, alt = rng.sample(list(L.VIEWS), 2)
    return Change("view", rng.choice(L.VIEWS[new]), new, "", f", {new}", f", {alt}")


def _place_change(old: str, cap: str, rng: random.Random) -> Change:
    here = cap.lower()
    stems = [w for w in re.findall(r"[a-z]+", old.lower()) if len(w) > 3]  # "grass" vs "grassy"
    cands = [p for p in L.PLACES if p[1].split()[-1] not in here
             and not any(v.startswith(w) for w in stems for v in p[1].split())]
    (prep, np_), (aprep, anp) = rng.sample(cands, 2)
    clause = rng.choice([f"change the background to {np_}", f"set the scene {prep} {np_}",
                         f"move everything {prep} {np_}"])
    terse = rng.choice([f"{prep} {np_}", np_.split(" ", 1)[1]])
    lead = "" if old else " "  # an appended place needs its own space
    return Change("background", clause, terse, old, f"{lead}{prep} {np_}", f"{lead}{aprep} {anp}")


def background(cap: str, rng: random.Random) -> Change | None:
    nouns = "|".join(map(re.escape, sorted(L.PLACE_NOUNS, key=len, reverse=True)))
    pat = rf"(?<![\w-])(?:in|on|at|inside|near|by|along|down|across|over|through|beside)\s+(?:an?|the)\s+(?:[a-z-]+\s+){{0,2}}(?:{nouns})(?![\w-])"
    found = list(re.finditer(pat, cap, re.I))
    return _place_change(found[-1].group(0), cap, rng) if found else None


def background_append(cap: str, rng: random.Random) -> Change | None:
    if background(cap, random.Random(0)) is not None:
        return None  # a second place would contradict the first
    return _place_change("", cap, rng)


# Per edit type: in-place ops (tried in random order), then the appending fallback.
OPS = {"attribute": ([colour, size, material, count, replace, remove], add),
       "spatial": ([move], view),
       "scene": ([background], background_append)}
APPEND_FIRST = 0.2  # how often the fallback is tried first, so appends are not only a last resort


def change_for(cap: str, kind: str, rng: random.Random) -> Change | None:
    """One applicable change of `kind` (attribute, spatial or scene) to `cap`."""
    inplace, fallback = OPS[kind]
    order = rng.sample(inplace, len(inplace))
    order = [fallback] + order if rng.random() < APPEND_FIRST else order + [fallback]
    for op in order:
        ch = op(cap, rng)
        if ch is not None and apply(cap, ch.old, ch.new) not in (None, cap):
            return ch
    return None


def _sentence(clause: str) -> str:
    return clause[0].upper() + clause[1:] + "."


def generate(cap: str, edit_type: str, rng: random.Random) -> dict | None:
    """{edit, target_caption, negatives, ops} for `edit_type`, or None if no rule applies.
    Negatives, as the world makes them: the source caption (edit not applied), the same kind of
    change with a wrong value, and for two changes the target with the second one missing."""
    if edit_type in OPS:
        ch = change_for(cap, edit_type, rng)
        if ch is None:
            return None
        target = apply(cap, ch.old, ch.new)
        wrong = apply(cap, ch.old, ch.alt) if ch.alt is not None else None
        return {"edit": _sentence(ch.clause), "target_caption": target,
                "negatives": [n for n in (cap, wrong) if n], "ops": [ch.op]}
    if edit_type == "short":
        ch = change_for(cap, rng.choice(("attribute", "attribute", "scene", "spatial")), rng)
        if ch is None:
            return None
        wrong = apply(cap, ch.old, ch.alt) if ch.alt is not None else None
        return {"edit": ch.terse, "target_caption": apply(cap, ch.old, ch.new),
                "negatives": [n for n in (cap, wrong) if n], "ops": [ch.op]}
    if edit_type == "two":
        first = change_for(cap, "attribute", rng)
        second = change_for(cap, rng.choice(("spatial", "scene")), rng)
        if first is None or second is None:
            return None
        half = apply(cap, first.old, first.new)
        target = apply(half, second.old, second.new) if half else None
        if target in (None, half):  # the second change's span was rewritten by the first
            return None
        only_second = apply(cap, second.old, second.new)
        return {"edit": _sentence(f"{first.clause} and {second.clause}"), "target_caption": target,
                "negatives": [n for n in (cap, half, only_second) if n], "ops": [first.op, second.op]}
    raise ValueError(f"unknown edit type {edit_type!r}")
