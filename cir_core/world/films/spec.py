"""What a film frame is: figures (credited actors and uncredited extras), a place, floating props.

A shot's state (`Frame`) is a place (one of the world's backgrounds), 1–3 `Figure`s in distinct
slots and 0–2 props (the world's `Obj`: distinct shapes, distinct slots). A credited figure is
one of the world's 24 identities — the film world's *actors*, who recur across films as MovieNet's
credited cast recurs across shots; an uncredited extra ("others" in MovieNet) is bare-headed in a
drab colour that no actor wears, so it can never pass for one.

Ground truth is relative to one credited character A: `Frame.key_for(A)` is the place, A's slot,
facing and pose, who stands where around A (actors by identity, extras only as "someone") and the
props. Two frames showing A match when their keys for A are equal, whatever the film, its colour
grade, the camera, the extras' looks or the other figures' poses.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..render import POSES
from ..spec import BACKGROUNDS, FACINGS, HELD_OUT_CHAR_BG, HELD_OUT_OBJECTS, N_IDENTITIES, POSITIONS, Obj

EXTRA_COLOURS = ("beige", "olive", "maroon", "slate", "tan", "plum")  # no actor wears these
OTHER = "others"  # MovieNet's pid of an uncredited person
MAX_FIGURES, MAX_PROPS = 3, 2

__all__ = ["EXTRA_COLOURS", "Figure", "Frame", "MAX_FIGURES", "MAX_PROPS", "OTHER", "POSES"]


@dataclass(frozen=True)
class Figure:
    """`who` >= 0: the actor with that world identity; < 0: an extra with look -1 - who."""

    who: int
    slot: str
    facing: str
    pose: str = "standing"

    @property
    def credited(self) -> bool:
        return self.who >= 0

    @property
    def kind(self) -> int | str:
        """What a key records of a figure beside A: the actor, or only that someone is there."""
        return self.who if self.who >= 0 else OTHER


@dataclass(frozen=True)
class Frame:
    place: str
    figures: tuple[Figure, ...]  # sorted by slot, one per slot
    objects: tuple[Obj, ...] = ()  # sorted by slot; distinct shapes and slots

    # -- who is where ----------------------------------------------------------------------------
    def figure(self, who: int) -> Figure | None:
        return next((f for f in self.figures if f.who == who), None)

    def at(self, slot: str) -> Figure | None:
        return next((f for f in self.figures if f.slot == slot), None)

    def credited(self) -> list[int]:
        return [f.who for f in self.figures if f.credited]

    def free_slots(self) -> list[str]:
        used = {f.slot for f in self.figures}
        return [p for p in POSITIONS if p not in used]

    def free_prop_slots(self) -> list[str]:
        used = {o.position for o in self.objects}
        return [p for p in POSITIONS if p not in used]

    def obj(self, shape: str) -> Obj | None:
        return next((o for o in self.objects if o.shape == shape), None)

    # -- ground truth ----------------------------------------------------------------------------
    def key_for(self, who: int) -> tuple | None:
        """The frame as a query about actor `who` sees it (None when `who` is not in it)."""
        a = self.figure(who)
        return None if a is None else self._key(a)

    def _key(self, a: Figure) -> tuple:
        around = tuple(sorted((f.slot, str(f.kind)) for f in self.figures if f.who != a.who))
        return (self.place, a.slot, a.facing, a.pose, around,
                tuple(sorted((o.position, o.shape, o.colour, o.size) for o in self.objects)))

    def keys(self) -> dict[int, tuple]:
        """`key_for` of every credited figure: what the gallery's ground-truth index holds."""
        return {f.who: self._key(f) for f in self.figures if f.credited}

    def is_novel(self) -> bool:
        """An actor on its held-out place, or a held-out prop colour: never in a training film."""
        return (any((w, self.place) in HELD_OUT_CHAR_BG for w in self.credited())
                or any((o.shape, o.colour) in HELD_OUT_OBJECTS for o in self.objects))

    # -- building --------------------------------------------------------------------------------
    def with_figures(self, figures) -> "Frame":
        return replace(self, figures=tuple(sorted(figures, key=lambda f: POSITIONS.index(f.slot))))

    def with_objects(self, objects) -> "Frame":
        return replace(self, objects=tuple(sorted(objects, key=lambda o: POSITIONS.index(o.position))))

    def validate(self) -> None:
        """Raise ValueError naming the first thing wrong with this frame."""
        figs, objs = self.figures, self.objects
        who = [f.who for f in figs]
        problem = (
            f"unknown place {self.place!r}" if self.place not in BACKGROUNDS else
            f"a frame has 1-{MAX_FIGURES} figures" if not 1 <= len(figs) <= MAX_FIGURES else
            "one figure per slot" if len({f.slot for f in figs}) != len(figs) else
            "a figure appears twice" if len(set(who)) != len(who) else
            next((f"bad figure {f}" for f in figs if not (
                -len(EXTRA_COLOURS) <= f.who < N_IDENTITIES and f.slot in POSITIONS
                and f.facing in FACINGS and f.pose in POSES)), None) or
            (f"a frame has at most {MAX_PROPS} props" if len(objs) > MAX_PROPS else
             "prop shapes must be distinct" if len({o.shape for o in objs}) != len(objs) else
             "one prop per slot" if len({o.position for o in objs}) != len(objs) else
             next((f"bad prop {o}" for o in objs if not o.is_valid()), None)))
        if problem is not None:
            raise ValueError(f"invalid frame: {problem}")

    def to_list(self) -> list:
        return [self.place, [[f.who, f.slot, f.facing, f.pose] for f in self.figures],
                [[o.shape, o.colour, o.size, o.position] for o in self.objects]]

    @staticmethod
    def from_list(v: list) -> "Frame":
        place, figs, objs = v
        f = Frame(place, tuple(Figure(int(w), s, fa, p) for w, s, fa, p in figs),
                  tuple(Obj(*o) for o in objs))
        f.validate()
        return f
