"""Scene specifications of the generated world: vocabulary, dataclasses, sampling, held-out rules.

A scene is a background, one character (a drawn figure with one of 24 identities, standing on
the ground) and 1–3 floating objects (shape, colour, size, position). Every image is rendered
from a `Scene`, so every query has an exact ground truth: two images match when their scenes'
`key()` are equal, whatever the render seed (which only jitters placement and details).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

SHAPES = ("circle", "square", "triangle", "star", "cross")
COLOURS = ("red", "orange", "yellow", "green", "blue", "purple", "white", "black")
SIZES = ("small", "large")
POSITIONS = ("left", "center", "right")
FACINGS = ("left", "right")
BACKGROUNDS = ("meadow", "beach", "desert", "snowfield", "night", "city", "forest", "sunset")

# Identity = body colour x hat; a name stands in for a film character's name.
BODY_COLOURS = ("teal", "pink", "brown", "grey", "lime", "navy")
HATS = ("top hat", "crown", "horns", "antenna")
NAMES = (
    "Ada", "Bruno", "Cleo", "Dax", "Elio", "Faye", "Gus", "Hana", "Ivo", "Juno", "Kai", "Lena",
    "Milo", "Nora", "Otto", "Pia", "Quin", "Rosa", "Sami", "Tova", "Uma", "Vik", "Wren", "Yara",
)
N_IDENTITIES = len(NAMES)
assert N_IDENTITIES == len(BODY_COLOURS) * len(HATS)

# Attribute combinations never seen in the training split, so evaluation measures generalisation.
HELD_OUT_OBJECTS = frozenset({
    ("star", "purple"), ("cross", "orange"), ("triangle", "green"), ("circle", "white"),
    ("square", "yellow"), ("star", "black"),
})
# Each identity is never shown on one background in training (identity i on background i % 8).
HELD_OUT_CHAR_BG = frozenset((i, BACKGROUNDS[i % len(BACKGROUNDS)]) for i in range(N_IDENTITIES))


def identity_look(identity: int) -> tuple[str, str]:
    """(body colour, hat) of an identity."""
    return BODY_COLOURS[identity % len(BODY_COLOURS)], HATS[identity // len(BODY_COLOURS)]


@dataclass(frozen=True)
class Obj:
    shape: str
    colour: str
    size: str
    position: str

    def is_valid(self) -> bool:
        """Every attribute is one of the vocabulary's."""
        return (self.shape in SHAPES and self.colour in COLOURS and self.size in SIZES
                and self.position in POSITIONS)


@dataclass(frozen=True)
class Character:
    identity: int
    position: str
    facing: str

    @property
    def name(self) -> str:
        return NAMES[self.identity]


@dataclass(frozen=True)
class Scene:
    background: str
    character: Character
    objects: tuple[Obj, ...]  # sorted by position; shapes distinct so "the star" is unambiguous

    def key(self) -> tuple:
        """Canonical ground-truth key: equal keys = the same scene, whatever the render."""
        return (self.background, self.character.identity, self.character.position,
                self.character.facing,
                tuple(sorted((o.position, o.shape, o.colour, o.size) for o in self.objects)))

    def key_without_identity(self) -> tuple:
        """The key with the character's identity blanked: 'does it satisfy the edit'."""
        k = self.key()
        return (k[0], None) + k[2:]

    def obj(self, shape: str) -> Obj | None:
        return next((o for o in self.objects if o.shape == shape), None)

    def free_positions(self) -> list[str]:
        used = {o.position for o in self.objects}
        return [p for p in POSITIONS if p not in used]

    def with_objects(self, objects: list[Obj] | tuple[Obj, ...]) -> "Scene":
        return replace(self, objects=tuple(sorted(objects, key=lambda o: POSITIONS.index(o.position))))

    def is_novel(self) -> bool:
        """True when the scene holds a combination held out of the training split."""
        if any((o.shape, o.colour) in HELD_OUT_OBJECTS for o in self.objects):
            return True
        return (self.character.identity, self.background) in HELD_OUT_CHAR_BG

    def validate(self) -> None:
        """Raise ValueError naming the first thing wrong with this scene."""
        # Each message is made only on failure: a stored split validates ~8k scenes per start.
        c, objs = self.character, self.objects
        problem = (
            f"unknown background {self.background!r}" if self.background not in BACKGROUNDS else
            f"identity {c.identity} out of range" if not 0 <= c.identity < N_IDENTITIES else
            f"bad character position {c.position!r}" if c.position not in POSITIONS else
            f"bad facing {c.facing!r}" if c.facing not in FACINGS else
            "a scene has 1-3 objects" if not 1 <= len(objs) <= 3 else
            "object shapes must be distinct" if len({o.shape for o in objs}) != len(objs) else
            "one object per slot" if len({o.position for o in objs}) != len(objs) else
            next((f"bad object {o}" for o in objs if not o.is_valid()), None))
        if problem is not None:
            raise ValueError(f"invalid scene: {problem}")

    def to_dict(self) -> dict:
        """`dataclasses.asdict(self)`, written out: fingerprints of every gallery item are built
        from it, and asdict's generic recursion made that ~1 s of an app start."""
        c = self.character
        return {"background": self.background,
                "character": {"identity": c.identity, "position": c.position, "facing": c.facing},
                "objects": tuple({"shape": o.shape, "colour": o.colour, "size": o.size, "position": o.position}
                                 for o in self.objects)}

    @staticmethod
    def from_dict(d: dict) -> "Scene":
        s = Scene(d["background"], Character(**d["character"]),
                  tuple(Obj(**o) for o in d["objects"]))
        s.validate()
        return s


def random_object(rng: random.Random, shape: str, position: str) -> Obj:
    return Obj(shape, rng.choice(COLOURS), rng.choice(SIZES), position)


def sample_scene(rng: random.Random, allow_novel: bool = True, n_objects: int | None = None) -> Scene:
    """A uniformly random scene; with allow_novel=False, one free of held-out combinations."""
    while True:
        n = n_objects or rng.choice((1, 2, 2, 3, 3))
        shapes = rng.sample(SHAPES, n)
        positions = rng.sample(POSITIONS, n)
        objs = [random_object(rng, s, p) for s, p in zip(shapes, positions)]
        char = Character(rng.randrange(N_IDENTITIES), rng.choice(POSITIONS), rng.choice(FACINGS))
        scene = Scene(rng.choice(BACKGROUNDS), char, ()).with_objects(objs)
        if allow_novel or not scene.is_novel():
            return scene
