"""What a compare request returns: plain dataclasses (`CompareResult.to_dict()` is the JSON API)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
from PIL import Image


@dataclass
class Reference:
    """The reference image of one request and its embedding (computed once)."""

    kind: str  # "gallery" | "upload"
    label: str  # the gallery id, or "upload: name.png"
    embedding: np.ndarray  # (D,)
    row: int | None = None  # gallery row (excluded from the results)
    item_id: str | None = None
    image: Image.Image | None = None  # uploads: a display copy (<= 512 px)
    character: str | None = None  # the character's name, when the gallery knows it
    character_pid: str | None = None  # MovieNet: the credited cast id the reference's queries follow
    encode_ms: float = 0.0  # time spent encoding it (0 for a gallery item)
    key: tuple | None = None  # identifies the pixels across requests (None: unknown, never cached)
    norm: float | None = None  # the raw image feature's norm before L2 (None: not recorded)


@dataclass
class Why:
    """What a result's score is made of (`cir_core.engine.explain`): its cosine to the query and
    Chord's direction term cos(q − q∅, v − v_r), the λ Chord weighs it with (the method's), the
    Chord score they make, and the result's rank under each scoring, ranked as the gallery's
    searcher ranks (None: below `cir_core.engine.explain.RANK_DEPTH`, 200)."""

    cosine: float
    direction: float
    lam: float
    rank_cosine: int | None
    rank_chord: int | None
    lam_direction: float = field(init=False)  # λ · direction
    chord: float = field(init=False)  # cosine + λ · direction

    def __post_init__(self) -> None:
        self.lam_direction = self.lam * self.direction
        self.chord = self.cosine + self.lam_direction


@dataclass
class Hit:
    rank: int
    row: int
    item_id: str
    score: float
    is_target: bool | None  # None: no ground truth for this (reference, edit)
    character: str | None
    same_character: bool | None  # None: the reference's character is unknown
    why: Why | None = None  # a method column's hit: its score terms and ranks (not a progression's)


@dataclass
class MethodResult:
    name: str
    label: str
    hits: list[Hit] = field(default_factory=list)
    error: str | None = None
    lam: float | None = None  # the Chord λ used (None for cosine)
    compose_ms: float = 0.0  # its own work: waits and one-time builds are apart
    search_ms: float = 0.0
    wait_ms: float = 0.0  # waiting behind other requests' work (the shared batch worker, a lock)
    build_ms: float = 0.0  # one-time builds on its first use (its load, CIReVL's caption bank)

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class Step:
    index: int  # 1-based
    sentence: str  # the sentence this step adds
    hits: list[Hit]


@dataclass
class Progression:
    method: str
    label: str
    native: bool  # the method's own step states (PACE's accumulator) vs prefix re-composition
    note: str
    steps: list[Step]
    total_sentences: int


@dataclass
class MapPoint:
    """One point of the map: `kind` "reference" | "query" | "step" | "result" | "target";
    `method` for a query, a step or a result; `rank` a result's rank or a step's index; `row` the
    gallery row of an image."""

    kind: str
    x: float
    y: float
    method: str | None = None
    rank: int | None = None
    row: int | None = None


@dataclass
class NeighbourhoodMap:
    """The request's neighbourhood in 2-D: `explained`, the share of the images' variance (about
    their mean) the two axes hold; `images`, how many distinct images the axes were fit on."""

    points: list[MapPoint] = field(default_factory=list)
    explained: float = 0.0
    images: int = 0


@dataclass
class CompareResult:
    reference: Reference
    edit: str
    sentences: list[str]
    k: int
    scoring: str
    lam: float | None  # None: each method's own λ
    variant: str
    query_id: str | None  # the world query this (reference, edit) is, when it is one
    target_rows: list[int]
    methods: list[MethodResult]
    progression: Progression | None
    timings: dict[str, float]  # ms: encode, compose, search (each its own work), wait, build, total
    notes: list[str] = field(default_factory=list)  # what the user should know (a text cut short)
    map: NeighbourhoodMap | None = None  # the neighbourhood in 2-D (`cir_core.engine.explain`)

    def to_dict(self) -> dict:
        ref = {k: v for k, v in asdict(self.reference).items() if k not in ("embedding", "image")}
        out = {k: v for k, v in asdict(self).items() if k != "reference"}
        out["reference"] = ref
        return out

