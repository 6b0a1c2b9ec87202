"""Language of the film world: what changed between two shots for one character, said in words.

An edit is the world's `Edit(op, target, value)` with the film's ops besides the prop ops of
the world (`colour`, `size`, `move`, `add`, `remove`, phrased by `world.language.edit_text`):

| op | target | value | says |
|---|---|---|---|
| `background` | — | place | "move them to a sandy beach" |
| `char_move` | — | slot | "move the character to the left" / "have the character stand next to the figure on the right" |
| `char_face` | — | facing | "turn the character to face left" / "have the character face the figure on the left" |
| `pose` | — | pose | "make the character sit down", "have the character raise both arms" |
| `join` | slot | actor or OTHER | "Bruno joins on the left" / "someone joins on the left" |
| `leave` | slot | — | "the figure on the left leaves" |
| `other_move` | slot | new slot | "the figure on the left moves to the middle" |
| `alone` | — | — | "leave the character alone" (every other figure goes) |

Edits never name or describe the query character: who it is must come from the reference frame.
Other figures are named when they are credited actors who join; otherwise they are pointed at by
where they stand. `diff(a, b, who)` lists the edits that turn frame a into frame b *as a query
about `who` sees them* (`Frame.key_for`), in an order in which each one reads right.
"""
from __future__ import annotations

import random
from dataclasses import replace

from ..language import AT, BG_PHRASE, POS_PHRASE, SIZE_WORD, Edit, edit_text
from ..spec import NAMES, POSITIONS, Obj
from .spec import OTHER, Figure, Frame

OBJECT_OPS = ("colour", "size", "move", "add", "remove")
COMPANY_OPS = ("join", "leave", "other_move", "alone")
POSE_PHRASE = {"standing": "standing", "sitting": "sitting", "arms up": "with arms raised"}
OP_FAMILY = {"background": "scene", "char_move": "spatial", "char_face": "spatial", "pose": "pose",
             **{op: "relation" for op in COMPANY_OPS}, **{op: "attribute" for op in OBJECT_OPS}}


def apply_film_edit(frame: Frame, who: int, e: Edit) -> Frame:
    """`frame` after `e` (a query about actor `who`); ValueError when `e` does not fit."""
    a = frame.figure(who)
    if a is None:
        raise ValueError(f"actor {who} is not in the frame")
    figs = list(frame.figures)
    if e.op == "background":
        return replace(frame, place=e.value_word)
    if e.op == "char_move":
        if frame.at(e.value_word) is not None:
            raise ValueError(f"the {e.value} slot is taken")
        figs[figs.index(a)] = replace(a, slot=e.value_word)
        return frame.with_figures(figs)
    if e.op in ("char_face", "pose"):
        v = e.value_word
        figs[figs.index(a)] = replace(a, facing=v) if e.op == "char_face" else replace(a, pose=v)
        return frame.with_figures(figs)
    if e.op == "join":
        if frame.at(e.target_word) is not None:
            raise ValueError(f"the {e.target} slot is taken")
        joined = Figure(_actor(e), e.target_word, "left", "standing")
        return frame.with_figures(figs + [joined])
    if e.op in ("leave", "other_move"):
        f = frame.at(e.target_word)
        if f is None or f.who == who:
            raise ValueError(f"no other figure on the {e.target}")
        if e.op == "leave":
            figs.remove(f)
        elif frame.at(e.value_word) is not None:
            raise ValueError(f"the {e.value} slot is taken")
        else:
            figs[figs.index(f)] = replace(f, slot=e.value_word)
        return frame.with_figures(figs)
    if e.op == "alone":
        if len(figs) < 2:
            raise ValueError("the character is already alone")
        return frame.with_figures([a])
    return _apply_prop(frame, e)


def _actor(e: Edit) -> int:
    """Who a `join` brings in: a credited actor's index, or -1 for `OTHER` (an uncredited person)."""
    if e.value == OTHER:
        return -1
    if not isinstance(e.value, (int, str)):
        raise ValueError(f"a 'join' edit's value is an actor or {OTHER!r}, not {e.value!r}")
    return int(e.value)


def _apply_prop(frame: Frame, e: Edit) -> Frame:
    objs = list(frame.objects)
    o = frame.obj(e.target) if e.target else None
    if e.op == "add":
        new = e.value_obj
        if frame.obj(new.shape) or new.position not in frame.free_prop_slots() or len(objs) >= 2:
            raise ValueError("no room to add")
        return frame.with_objects(objs + [new])
    if o is None:
        raise ValueError(f"no {e.target} in the frame")
    if e.op == "remove":
        objs.remove(o)
    elif e.op == "colour":
        objs[objs.index(o)] = replace(o, colour=e.value_word)
    elif e.op == "size":
        objs[objs.index(o)] = replace(o, size=e.value_word)
    elif e.op == "move":
        to = e.value_word
        if to not in frame.free_prop_slots():
            raise ValueError(f"the {to} slot is taken")
        objs[objs.index(o)] = replace(o, position=to)
    else:
        raise ValueError(f"unknown edit op {e.op!r}")
    return frame.with_objects(objs)


# -- what changed ----------------------------------------------------------------------------------

def _company(frame: Frame, who: int) -> dict[str, int | str]:
    return {f.slot: f.kind for f in frame.figures if f.who != who}


def _company_edits(a: Frame, b: Frame, who: int) -> list[Edit]:
    ca, cb = _company(a, who), _company(b, who)
    gone = {s: k for s, k in ca.items() if cb.get(s) != k}
    came = {s: k for s, k in cb.items() if ca.get(s) != k}
    if gone and not cb:
        return [Edit("alone")] if len(ca) > 1 else [Edit("leave", s) for s in gone]
    out = []
    for s, k in sorted(gone.items(), key=lambda x: POSITIONS.index(x[0])):
        to = next((t for t, k2 in sorted(came.items(), key=lambda x: POSITIONS.index(x[0])) if k2 == k), None)
        if to is not None:
            out.append(Edit("other_move", s, to))
            del came[to]
        else:
            out.append(Edit("leave", s))
    out += [Edit("join", s, k) for s, k in sorted(came.items(), key=lambda x: POSITIONS.index(x[0]))]
    return out


def _prop_edits(a: Frame, b: Frame) -> list[Edit]:
    out = []
    for o in a.objects:
        p = b.obj(o.shape)
        if p is None:
            out.append(Edit("remove", o.shape))
            continue
        out += [Edit("colour", o.shape, p.colour)] if p.colour != o.colour else []
        out += [Edit("size", o.shape, p.size)] if p.size != o.size else []
        out += [Edit("move", o.shape, p.position)] if p.position != o.position else []
    out += [Edit("add", None, p) for p in b.objects if a.obj(p.shape) is None]
    return out


def diff(a: Frame, b: Frame, who: int) -> list[Edit] | None:
    """The edits that turn `a` into `b` for a query about actor `who` (both must show them), in
    an order that applies step by step; None when no order does (or `who` is missing)."""
    fa, fb = a.figure(who), b.figure(who)
    if fa is None or fb is None:
        return None
    scene = [Edit("background", None, b.place)] if a.place != b.place else []
    own = [Edit(op, None, getattr(fb, f)) for op, f in (("char_move", "slot"), ("char_face", "facing"),
                                                        ("pose", "pose")) if getattr(fa, f) != getattr(fb, f)]
    company, props = _company_edits(a, b, who), _prop_edits(a, b)
    goal = b.key_for(who)
    # Who leaves goes first, who comes last: that frees the slots the others step into.
    leaving = [e for e in company if e.op in ("leave", "alone")]
    moving = [e for e in company if e.op == "other_move"]
    joining = [e for e in company if e.op == "join"]
    props = [e for e in props if e.op == "remove"] + [e for e in props if e.op != "remove"]
    for order in ([*scene, *leaving, *moving, *own, *joining, *props],
                  [*scene, *leaving, *own, *moving, *joining, *props]):
        cur = a
        try:
            for e in order:
                cur = apply_film_edit(cur, who, e)
        except ValueError:
            continue
        if cur.key_for(who) == goal:
            return list(order)
    return None


# -- in words --------------------------------------------------------------------------------------

def _side(slot: str) -> str:
    return AT[slot]


def film_edit_text(e: Edit, before: Frame, who: int, rng: random.Random, short: bool = False) -> str:
    """A phrasing of `e` applied to `before` (a query about `who`): an imperative clause, or a
    terse retrieval-style phrase."""
    if e.op in OBJECT_OPS:
        return edit_text(e, rng, short=short)
    if e.op == "background":
        b = BG_PHRASE[e.value_word]
        return rng.choice([f"in {b}", b.split(" ", 1)[1]] if short else
                          [f"move them to {b}", f"set the scene in {b}", f"change the background to {b}",
                           f"take everyone to {b}"])
    if e.op == "char_move":
        v = e.value_word
        forms = [f"move the character to the {POS_PHRASE[v]}", f"have the character stand {AT[v]}",
                 f"the character should be {AT[v]}"]
        terse = [f"character {AT[v]}", f"standing {AT[v]}"]
        ends = [s for s in ("left", "right") if (f := before.at(s)) is not None and f.who != who]
        if v == "center" and ends and not short:
            forms.append(f"have the character stand next to the figure {AT[rng.choice(ends)]}")
        return rng.choice(terse if short else forms)
    if e.op == "char_face":
        a = before.figure(who)
        if a is None:
            raise ValueError(f"actor {who} is not in the frame")
        forms = [f"turn the character to face {e.value}", f"have the character look to the {e.value}",
                 f"make the character face {e.value}"]
        step = -1 if e.value == "left" else 1
        i = POSITIONS.index(a.slot)
        towards = [POSITIONS[j] for j in range(i + step, 3 if step > 0 else -1, step)
                   if 0 <= j < 3 and before.at(POSITIONS[j]) is not None]
        if towards and not short:
            forms.append(f"have the character face the figure {AT[towards[0]]}")
        return rng.choice([f"facing {e.value}", f"looking {e.value}"] if short else forms)
    if e.op == "pose":
        v = e.value_word
        forms = {"sitting": ["make the character sit down", "have the character take a seat",
                             "the character should be sitting"],
                 "standing": ["have the character stand up", "make the character stand",
                              "the character should be standing"],
                 "arms up": ["have the character raise both arms", "make the character put their arms up",
                             "the character should have their arms raised"]}[v]
        terse = {"sitting": ["sitting down", "seated"], "standing": ["standing up", "on their feet"],
                 "arms up": ["arms raised", "hands up"]}[v]
        return rng.choice(terse if short else forms)
    if e.op == "join":
        name = "someone" if e.value == OTHER else NAMES[_actor(e)]
        at = AT[e.target_word]
        forms = [f"{name} joins {at}", f"have {name} stand {at}", f"add {name} {at}"]
        return rng.choice([f"with {name} {at}", f"plus {name} {at}"] if short else forms)
    if e.op == "leave":
        at = AT[e.target_word]
        forms = [f"the figure {at} leaves", f"remove the figure {at}", f"nobody should stand {at}"]
        return rng.choice([f"nobody {at}", f"without the figure {at}"] if short else forms)
    if e.op == "other_move":
        v = e.value_word
        forms = [f"the figure {AT[e.target_word]} moves to the {POS_PHRASE[v]}",
                 f"move the figure {AT[e.target_word]} to the {POS_PHRASE[v]}"]
        return rng.choice([f"the other figure {AT[v]}"] if short else forms)
    if e.op == "alone":
        return rng.choice(["alone", "nobody else"] if short else
                          ["leave the character alone", "the others leave", "everyone else goes away"])
    raise ValueError(f"unknown edit op {e.op!r}")


def _who(f: Figure, focus: int | None, name: bool, rng: random.Random) -> str:
    if f.who < 0:
        return "someone"
    if f.who == focus and not name:
        return rng.choice(["a character", "a figure", "the character"])
    return NAMES[f.who]


def frame_caption(frame: Frame, rng: random.Random, focus: int | None = None, name: bool = True,
                  background: bool = True, props: bool = True) -> str:
    """A one-sentence caption: the focus figure (or the first credited one) first, the others by
    where they stand, the place, the props. name=False leaves the focus unnamed ("a character");
    background / props False leave those out."""
    first = frame.figure(focus) if focus is not None else next(
        (f for f in frame.figures if f.credited), frame.figures[0])
    if first is None:
        raise ValueError(f"actor {focus} is not in the frame")
    main = f"{_who(first, focus, name, rng)} {POSE_PHRASE[first.pose]} {AT[first.slot]}, facing {first.facing}"
    others = [f"{_who(f, focus, True, rng)} {AT[f.slot]}" for f in frame.figures if f is not first]
    text = main + (", with " + " and ".join(others) if others else ", alone")
    if background:
        text += f", in {BG_PHRASE[frame.place]}"
    if props and frame.objects:
        parts = [f"a {SIZE_WORD[o.size][0]} {o.colour} {o.shape} {AT[o.position]}" for o in frame.objects]
        text += ", below " + " and ".join(parts)
    return text[0].upper() + text[1:] + "."


def wrong_value(frame: Frame, who: int, e: Edit, rng: random.Random) -> Frame | None:
    """`frame` after the right kind of change with a wrong value (a failed modification)."""
    from ..spec import BACKGROUNDS, COLOURS, FACINGS
    from .spec import POSES

    choices = {"background": BACKGROUNDS, "char_move": POSITIONS, "char_face": FACINGS, "pose": POSES,
               "colour": COLOURS, "size": ("small", "large"), "move": POSITIONS}.get(e.op)
    if choices is None:
        return None
    outs = []
    for v in choices:
        if v == e.value:
            continue
        try:
            outs.append(apply_film_edit(frame, who, replace(e, value=v)))
        except ValueError:
            continue
    outs = [o for o in outs if o.key_for(who) != frame.key_for(who)]
    return rng.choice(outs) if outs else None


__all__ = ["OBJECT_OPS", "COMPANY_OPS", "OP_FAMILY", "apply_film_edit", "diff", "film_edit_text",
           "frame_caption", "wrong_value", "Obj"]
