"""Films, deterministic from (split, index): a cast, settings, a colour grade, props, and a story.

A film has its own colour grade (`PALETTES`), 3–5 settings (the world's backgrounds), a credited
cast of 5–10 actors in billing order (MovieNet keeps the top-10 credited cast), a pool of
uncredited extras and a pool of props. `shoot(film)` tells its story: scenes of 12–32 shots, each
scene at one of the film's settings with a roster of actors and extras; every shot follows the
previous one by one change (someone moves, turns, sits down, raises their arms, enters, leaves; a
prop appears, goes, changes). A cut to the next scene either carries the last shot's figures to
the new place (a *continuation*: what a "move them to the beach" edit describes) or opens on a
fresh arrangement. Leads appear more often than the rest of the cast. Training films
(`allow_novel=False`) never put an actor on its held-out place nor show a held-out prop colour.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from functools import cached_property

from ..spec import (
    BACKGROUNDS,
    COLOURS,
    FACINGS,
    HELD_OUT_CHAR_BG,
    HELD_OUT_OBJECTS,
    N_IDENTITIES,
    NAMES,
    POSITIONS,
    SHAPES,
    SIZES,
    Obj,
)
from .spec import EXTRA_COLOURS, MAX_PROPS, POSES, Figure, Frame

FILM_VERSION = 1  # bump when a film's story changes for the same (split, index)
SPLIT_CODES = {"train": 0, "test": 1, "val": 2}
PALETTES = ("natural", "warm", "cool", "faded", "green", "muted")
POSE_WEIGHTS = (0.6, 0.25, 0.15)  # standing, sitting, arms up, for a fresh arrangement
# One story step: what changes between two shots, and how often.
STEP_OPS = {"move": 3.0, "face": 3.0, "pose": 4.0, "enter": 2.2, "leave": 2.0, "prop_add": 1.0,
            "prop_remove": 0.8, "prop_colour": 1.2, "prop_size": 0.8, "prop_move": 0.8}
CONTINUATION = 0.55  # share of scene cuts that carry the figures to the new place

_FIRST = ("Jack", "Rose", "Billy", "Clara", "Otis", "Mara", "Felix", "Iris", "Hugo", "Nell", "Leo",
          "Ruth", "Abe", "Vera", "Cal", "June", "Max", "Lola", "Sam", "Edie", "Roy", "Tess", "Gil", "Maud")
_LAST = ("Hale", "Reyes", "Dawson", "Voss", "Quill", "Marsh", "Crane", "Lowe", "Finch", "Stone",
         "Wade", "Frost", "Nash", "Pike", "Rowe", "Sloane", "Tate", "Vance")
_ADJ = ("Silent", "Last", "Crimson", "Hidden", "Long", "Broken", "Golden", "Distant", "Lost", "Pale",
        "Burning", "Quiet", "Seventh", "Hollow", "Wild", "Northern")
_NOUN = ("Harbour", "Summer", "Road", "Crown", "Garden", "Winter", "Signal", "Orchard", "River",
         "Letter", "Station", "Tide", "Mirror", "Frontier", "Lantern", "Promise")


def actor_pid(identity: int) -> str:
    """The actor's person id, IMDb style as MovieNet's `pid` ("nm" + 7 digits)."""
    return f"nm99{identity:05d}"


@dataclass(frozen=True)
class CastMember:
    identity: int  # the actor (a world identity); billing = position in Film.cast
    character: str  # the character's name in this film

    @property
    def pid(self) -> str:
        return actor_pid(self.identity)

    @property
    def actor(self) -> str:
        return NAMES[self.identity]


@dataclass(frozen=True)
class Film:
    split: str
    index: int
    title: str
    palette: str
    settings: tuple[str, ...]
    cast: tuple[CastMember, ...]  # billing order
    extras: tuple[int, ...]  # the extras' `who` (negative)
    props: tuple[tuple[str, str], ...]  # (shape, colour) pool

    @property
    def film_id(self) -> str:
        """IMDb style, as MovieNet keys its films ("tt" + 7 digits)."""
        return f"tt9{SPLIT_CODES[self.split]}{self.index:05d}"

    @property
    def allow_novel(self) -> bool:
        return self.split != "train"

    def member(self, identity: int) -> CastMember | None:
        return next((c for c in self.cast if c.identity == identity), None)

    @cached_property
    def story(self) -> "Story":
        return shoot(self)


@dataclass(frozen=True)
class Shot:
    index: int
    scene: int
    state: Frame
    seed: int  # camera and jitter of its three keyframes
    place_seed: int  # its scene's background details: a setting looks the same through a scene


@dataclass(frozen=True)
class FilmScene:
    index: int
    place: str
    first: int  # first shot index
    last: int  # last shot index (inclusive)
    continuation: bool  # the first shot carries the previous scene's last figures


@dataclass
class Story:
    scenes: list[FilmScene] = field(default_factory=list)
    shots: list[Shot] = field(default_factory=list)


def make_film(split: str, index: int) -> Film:
    """Film `index` of `split` ("train", "val" or "test"), the same for the same arguments."""
    if split not in SPLIT_CODES:
        raise ValueError(f"film splits are {', '.join(SPLIT_CODES)}, not {split!r}")
    rng = random.Random(f"film:{split}:{index}:{FILM_VERSION}")
    title = f"The {rng.choice(_ADJ)} {rng.choice(_NOUN)}"
    settings = tuple(rng.sample(BACKGROUNDS, rng.randint(3, 5)))
    actors = rng.sample(range(N_IDENTITIES), rng.randint(5, 10))
    if split == "train":  # every actor must have somewhere to be
        actors = [a for a in actors if any((a, p) not in HELD_OUT_CHAR_BG for p in settings)]
    names = rng.sample([f"{f} {s}" for f in _FIRST for s in _LAST], len(actors))
    extras = tuple(-1 - k for k in rng.sample(range(len(EXTRA_COLOURS)), rng.randint(2, 4)))
    pool = [(s, c) for s in SHAPES for c in COLOURS
            if split != "train" or (s, c) not in HELD_OUT_OBJECTS]
    props = tuple(rng.sample(pool, rng.randint(3, 5)))
    return Film(split, index, title, rng.choice(PALETTES), settings,
                tuple(CastMember(a, n) for a, n in zip(actors, names)), extras, props)


# -- the story -----------------------------------------------------------------------------------

def _roster(film: Film, place: str, rng: random.Random) -> list[int]:
    """Who is around in a scene at `place`: 1–4 actors (leads more often) and 0–2 extras."""
    allowed = [c.identity for c in film.cast if film.allow_novel or (c.identity, place) not in HELD_OUT_CHAR_BG]
    weights = [1.0 / (1 + 0.45 * b) for b, c in enumerate(film.cast) if c.identity in allowed]
    k = min(len(allowed), rng.choice((1, 2, 2, 3, 3, 4)))
    chosen: list[int] = []
    while len(chosen) < k:
        a = rng.choices(allowed, weights)[0]
        if a not in chosen:
            chosen.append(a)
    return chosen + rng.sample(film.extras, min(len(film.extras), rng.choice((0, 1, 1, 2))))


def _facing_in(slot: str, rng: random.Random) -> str:
    """Someone who walks in looks into the frame."""
    return {"left": "right", "right": "left"}.get(slot) or rng.choice(FACINGS)


def _prop(film: Film, frame: Frame, rng: random.Random) -> Obj | None:
    shapes = [p for p in film.props if frame.obj(p[0]) is None]
    slots = frame.free_prop_slots()
    if not shapes or not slots or len(frame.objects) >= MAX_PROPS:
        return None
    shape, colour = rng.choice(shapes)
    return Obj(shape, colour, rng.choice(SIZES), rng.choice(slots))


def _fresh(film: Film, place: str, roster: list[int], rng: random.Random) -> Frame:
    """A scene's opening shot: 1–3 of the roster (at least one actor), 0–2 props."""
    n = min(len(roster), rng.choice((1, 2, 2, 3)))
    who = [rng.choice([w for w in roster if w >= 0])]
    who += rng.sample([w for w in roster if w != who[0]], n - 1)
    slots = rng.sample(POSITIONS, len(who))
    figs = [Figure(w, s, rng.choice(FACINGS), rng.choices(POSES, POSE_WEIGHTS)[0]) for w, s in zip(who, slots)]
    frame = Frame(place, ()).with_figures(figs)
    for _ in range(rng.choice((0, 1, 1, 2))):
        o = _prop(film, frame, rng)
        if o is not None:
            frame = frame.with_objects(frame.objects + (o,))
    return frame


def _step(film: Film, frame: Frame, roster: list[int], rng: random.Random) -> Frame:
    """The next shot: `frame` with one change (redrawn until a change fits)."""
    ops, weights = list(STEP_OPS), list(STEP_OPS.values())
    for _ in range(50):
        op = rng.choices(ops, weights)[0]
        figs = list(frame.figures)
        f = rng.choice(figs)
        if op == "move" and frame.free_slots():
            figs[figs.index(f)] = replace(f, slot=rng.choice(frame.free_slots()))
        elif op == "face":
            figs[figs.index(f)] = replace(f, facing="left" if f.facing == "right" else "right")
        elif op == "pose":
            figs[figs.index(f)] = replace(f, pose=rng.choice([p for p in POSES if p != f.pose]))
        elif op == "enter" and frame.free_slots() and set(roster) - {g.who for g in figs}:
            who = rng.choice(sorted(set(roster) - {g.who for g in figs}))
            slot = rng.choice(frame.free_slots())
            figs.append(Figure(who, slot, _facing_in(slot, rng), "standing"))
        elif op == "leave" and len(figs) > 1:
            figs.remove(f)
        elif op.startswith("prop"):
            nxt = _prop_step(film, frame, op, rng)
            if nxt is not None:
                return nxt
            continue
        else:
            continue
        return frame.with_figures(figs)
    return frame


def _prop_step(film: Film, frame: Frame, op: str, rng: random.Random) -> Frame | None:
    objs = list(frame.objects)
    if op == "prop_add":
        o = _prop(film, frame, rng)
        return None if o is None else frame.with_objects(objs + [o])
    if not objs:
        return None
    o = rng.choice(objs)
    i = objs.index(o)
    if op == "prop_remove":
        del objs[i]
    elif op == "prop_colour":
        colours = [c for c in COLOURS if c != o.colour and (film.allow_novel or (o.shape, c) not in HELD_OUT_OBJECTS)]
        objs[i] = replace(o, colour=rng.choice(colours))
    elif op == "prop_size":
        objs[i] = replace(o, size="small" if o.size == "large" else "large")
    elif op == "prop_move" and frame.free_prop_slots():
        objs[i] = replace(o, position=rng.choice(frame.free_prop_slots()))
    else:
        return None
    return frame.with_objects(objs)


def _shots_target(rng: random.Random) -> int:
    return rng.randint(300, 360)


def shoot(film: Film) -> Story:
    """The film's scenes and shots (deterministic in the film)."""
    rng = random.Random(f"story:{film.split}:{film.index}:{FILM_VERSION}")
    total = _shots_target(rng)
    story = Story()
    frame: Frame | None = None
    roster: list[int] = []
    place = None
    while len(story.shots) < total:
        place = rng.choice([p for p in film.settings if p != place])
        cont = frame is not None and rng.random() < CONTINUATION and all(
            film.allow_novel or (w, place) not in HELD_OUT_CHAR_BG for w in roster if w >= 0)
        if cont and frame is not None:  # (cont implies a frame; said again for the type checker)
            frame = replace(frame, place=place)
        else:
            roster = _roster(film, place, rng)
            frame = _fresh(film, place, roster, rng)
        first, n = len(story.shots), min(rng.randint(12, 32), total - len(story.shots))
        place_seed = rng.randrange(1 << 30)
        for k in range(n):
            if k:
                frame = _step(film, frame, roster, rng)
            story.shots.append(Shot(first + k, len(story.scenes), frame, rng.randrange(1 << 30), place_seed))
        story.scenes.append(FilmScene(len(story.scenes), place, first, first + n - 1, cont))
    return story
