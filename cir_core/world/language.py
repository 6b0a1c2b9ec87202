"""Language of the world: scene captions and atomic edits with their phrasings.

An `Edit` is one atomic change (recolour, resize, reshape, move, add, remove, move or turn the
character, change the background). `apply_edit` gives the ground-truth target scene and
`edit_text` one of several phrasings, including the terse retrieval style. Edits never name
the character: who the character is must come from the reference image, as in real CIR.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Protocol, Sequence

from .spec import BACKGROUNDS, COLOURS, FACINGS, POSITIONS, SHAPES, SIZES, Character, Obj, Scene

BG_PHRASE = {
    "meadow": "a grassy meadow", "beach": "a sandy beach", "desert": "a desert",
    "snowfield": "a snowy field", "night": "a starry night", "city": "a city street",
    "forest": "a pine forest", "sunset": "a sunset",
}
POS_PHRASE = {"left": "left", "center": "middle", "right": "right"}
AT = {"left": "on the left", "center": "in the middle", "right": "on the right"}
SIZE_WORD = {"small": ("small", "smaller", "shrink"), "large": ("big", "bigger", "enlarge")}


@dataclass(frozen=True)
class Edit:
    """One atomic change. `target` is the shape it acts on (None for scene-level ops; the film
    world's company ops name a slot). `value` is a word for every op but `add` (an `Obj`) and the
    film world's `join` (an actor index, or `OTHER`); the `*_word` / `value_obj` views say which
    one an op reads and refuse the other with a ValueError."""
    op: str  # colour | size | shape | move | add | remove | char_move | char_face | background
    target: str | None = None
    value: str | int | Obj | None = None  # new colour / size / shape / position / facing / background, or an Obj

    @property
    def target_word(self) -> str:
        """`target` of an op that acts on something (a shape, a slot)."""
        if not isinstance(self.target, str):
            raise ValueError(f"a {self.op!r} edit names what it acts on, not {self.target!r}")
        return self.target

    @property
    def value_word(self) -> str:
        """`value` of an op whose value is a word (a colour, size, shape, position, facing, place, pose)."""
        if not isinstance(self.value, str):
            raise ValueError(f"a {self.op!r} edit's value is a word, not {self.value!r}")
        return self.value

    @property
    def value_obj(self) -> Obj:
        """`value` of an `add`: the object added."""
        if not isinstance(self.value, Obj):
            raise ValueError(f"a {self.op!r} edit's value is an object, not {self.value!r}")
        return self.value


def _acted_on(scene: Scene, e: Edit) -> Obj:
    o = scene.obj(e.target) if e.target else None
    if o is None:
        raise ValueError(f"no {e.target} in the scene")
    return o


def apply_edit(scene: Scene, e: Edit) -> Scene:
    """The scene after `e`; raises ValueError when the edit does not fit the scene."""
    objs = list(scene.objects)
    if e.op == "colour":
        o = _acted_on(scene, e)
        objs[objs.index(o)] = replace(o, colour=e.value_word)
    elif e.op == "size":
        o = _acted_on(scene, e)
        objs[objs.index(o)] = replace(o, size=e.value_word)
    elif e.op == "shape":
        o = _acted_on(scene, e)
        if scene.obj(e.value_word):
            raise ValueError(f"a {e.value} is already there")
        objs[objs.index(o)] = replace(o, shape=e.value_word)
    elif e.op == "move":
        o, to = _acted_on(scene, e), e.value_word
        if to not in scene.free_positions():
            raise ValueError(f"the {to} slot is taken")
        objs[objs.index(o)] = replace(o, position=to)
    elif e.op == "add":
        new = e.value_obj
        if len(objs) >= 3 or scene.obj(new.shape) or new.position not in scene.free_positions():
            raise ValueError("no room to add")
        objs.append(new)
    elif e.op == "remove":
        o = _acted_on(scene, e)
        if len(objs) <= 1:
            raise ValueError("cannot remove the last object")
        objs.remove(o)
    elif e.op == "char_move":
        return replace(scene, character=replace(scene.character, position=e.value_word))
    elif e.op == "char_face":
        return replace(scene, character=replace(scene.character, facing=e.value_word))
    elif e.op == "background":
        return replace(scene, background=e.value_word)
    else:
        raise ValueError(f"unknown edit op {e.op!r}")
    return scene.with_objects(objs)


def possible_edits(scene: Scene, ops: tuple[str, ...] | None = None) -> list[Edit]:
    """Every atomic edit that changes `scene` (optionally restricted to `ops`)."""
    out: list[Edit] = []
    free = scene.free_positions()
    for o in scene.objects:
        out += [Edit("colour", o.shape, c) for c in COLOURS if c != o.colour]
        out += [Edit("size", o.shape, s) for s in SIZES if s != o.size]
        out += [Edit("shape", o.shape, s) for s in SHAPES if not scene.obj(s)]
        out += [Edit("move", o.shape, p) for p in free]
        if len(scene.objects) > 1:
            out.append(Edit("remove", o.shape))
    if len(scene.objects) < 3:
        for s in SHAPES:
            if not scene.obj(s):
                out += [Edit("add", None, Obj(s, c, z, p)) for c in COLOURS for z in SIZES for p in free]
    c = scene.character
    out += [Edit("char_move", None, p) for p in POSITIONS if p != c.position]
    out += [Edit("char_face", None, f) for f in FACINGS if f != c.facing]
    out += [Edit("background", None, b) for b in BACKGROUNDS if b != scene.background]
    return [e for e in out if ops is None or e.op in ops]


class Chooser(Protocol):
    """What `edit_text` draws its phrasing with: a `random.Random`, or a stand-in that picks a
    given option (CIReVL's rules rewriter lists every phrasing)."""

    def choice(self, seq: Sequence[str], /) -> str: ...


def edit_text(e: Edit, rng: Chooser, short: bool = False) -> str:
    """A phrasing of `e`: an imperative clause, or with short=True a terse retrieval query."""
    t = e.target
    if e.op == "colour":
        v = e.value_word
        forms = [f"make the {t} {v}", f"change the {t} to {v}", f"paint the {t} {v}",
                 f"the {t} should be {v}", f"turn the {t} {v}"]
        terse = [f"{v} {t}", f"a {v} {t} instead"]
    elif e.op == "size":
        v = e.value_word
        adj, comp, verb = SIZE_WORD[v]
        forms = [f"make the {t} {adj}", f"{verb} the {t}", f"the {t} should be {comp}"]
        terse = [f"{comp} {t}", f"{adj} {t}"]
    elif e.op == "shape":
        v = e.value_word
        forms = [f"turn the {t} into a {v}", f"replace the {t} with a {v}", f"change the {t} to a {v}"]
        terse = [f"a {v} instead of the {t}", f"{v} not {t}"]
    elif e.op == "move":
        v = e.value_word
        p = POS_PHRASE[v]
        forms = [f"move the {t} to the {p}", f"put the {t} {AT[v]}", f"shift the {t} to the {p}"]
        terse = [f"{t} {AT[v]}", f"{t} {p}"]
    elif e.op == "add":
        o = e.value_obj
        p = AT[o.position]
        desc = f"{SIZE_WORD[o.size][0]} {o.colour} {o.shape}"
        forms = [f"add a {desc} {p}", f"put a {desc} {p}", f"include a {desc} {p}"]
        terse = [f"plus a {desc} {p}", f"with a {desc}"]
    elif e.op == "remove":
        forms = [f"remove the {t}", f"take away the {t}", f"get rid of the {t}"]
        terse = [f"no {t}", f"without the {t}"]
    elif e.op == "char_move":
        v = e.value_word
        p = POS_PHRASE[v]
        forms = [f"move the character to the {p}", f"have the character stand {AT[v]}",
                 f"the character should be {AT[v]}"]
        terse = [f"character {AT[v]}", f"standing {AT[v]}"]
    elif e.op == "char_face":
        v = e.value_word
        forms = [f"turn the character to face {v}", f"have the character look to the {v}",
                 f"make the figure face {v}"]
        terse = [f"facing {v}", f"looking {v}"]
    elif e.op == "background":
        v = e.value_word
        b = BG_PHRASE[v]
        forms = [f"change the background to {b}", f"set the scene in {b}", f"put everything in {b}",
                 f"move them to {b}"]
        terse = [f"in {b}", b.split(" ", 1)[1]]
    else:
        raise ValueError(f"unknown edit op {e.op!r}")
    return rng.choice(terse if short else forms)


def _objects_phrase(objs: tuple[Obj, ...], rng: random.Random) -> str:
    parts = [f"a {SIZE_WORD[o.size][0]} {o.colour} {o.shape} {AT[o.position]}"
             for o in objs]
    if rng.random() < 0.5:
        rng.shuffle(parts)
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def caption(scene: Scene, rng: random.Random, name: bool = True, character: bool = True,
            background: bool = True) -> str:
    """A one-sentence caption. name=False says 'a character' (the identity is omitted, as real
    target captions do); character=False / background=False leave those out entirely."""
    c: Character = scene.character
    who = c.name if name else rng.choice(["a character", "someone", "a figure"])
    objs = _objects_phrase(scene.objects, rng)
    bg = BG_PHRASE[scene.background]
    if character:
        who_part = rng.choice([f"{who} {AT[c.position]} facing {c.facing}",
                               f"{who} standing {AT[c.position]}, facing {c.facing}"])
        text = f"{who_part} in {bg}, with {objs}" if background else f"{who_part}, with {objs}"
    elif background:
        text = rng.choice([f"{objs} in {bg}", f"{bg} with {objs}"])
    else:
        text = objs
    return text[0].upper() + text[1:] + "."
