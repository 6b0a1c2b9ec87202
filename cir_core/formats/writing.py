"""What a format's writer writes from, and where: `Split`, a data set's split described without its
generator (pictures, and queries that point at them), and `Folder`, the output folder that counts
what it writes and records which source picture or query is behind every written name (the
provenance). The generated world builds a `Split` (`cir_core.world.export`) and hands it to a
format's writer; the writers know the formats, not the world."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image


@dataclass(frozen=True)
class Picture:
    """One image of a split: drawn on demand. Each field after `draw` is read by the formats that have it."""

    id: str  # its id in the source (a gallery item's id; a per-query render: the query's id)
    source: str  # what it is in the source, for the provenance
    draw: Callable[[], Image.Image]
    characters: tuple[str, ...] = ()  # who it shows (MovieNet's character_ids)
    film: str = ""  # the film it is a frame of (MovieNet's film_id)


@dataclass(frozen=True)
class Query:
    """One query of a split. Each field after `text` is read by the formats that have it."""

    source: str  # its id in the source
    reference: int  # index into `Split.pictures`
    target: int | None  # the one target recall counts; None: no target image (ITT)
    text: str
    subset: tuple[int, ...] = ()  # the target and its hard distractors (CIRR img_set, GeneCIS gallery)
    gt: tuple[int, ...] = ()  # every correct picture, the reference excluded (CIRCO gt_img_ids)
    second_text: str = ""  # another annotator's wording of the same edit (FashionIQ's second caption)
    shared_concept: str = ""  # what reference and target share (CIRCO)
    edit_type: str = ""  # the kind of edit (CIRCO's semantic aspect, ITT's edit type)
    attribute_only: bool = False  # the edit changes attributes only (GeneCIS change_attribute)
    ref_caption: str = ""  # the reference's caption (ITT)
    target_caption: str = ""  # the target's caption (ITT)
    negatives: tuple[str, ...] = ()  # captions of failed edits (ITT)
    ops: tuple[str, ...] = ()  # the edit's operations (ITT)
    character: str = ""  # the character the query follows, "" unknown (MovieNet's character_id)


@dataclass(frozen=True)
class Split:
    """A split to write: `name` is the source's split (test, val, train)."""

    name: str
    pictures: Sequence[Picture]
    queries: Sequence[Query]
    generator: Mapping[str, str] = field(default_factory=dict)  # what produced the texts: {"mode", "model"} (ITT)


@dataclass
class Folder:
    """The output folder: JSON, JSON lines and drawn images, counted; the provenance maps."""

    root: Path
    size: int  # pixels per side of the drawn images
    progress: bool
    n_images: int = 0
    items: dict[str, str] = field(default_factory=dict)  # written image id -> source picture
    queries: dict[str, str] = field(default_factory=dict)  # written query id -> source query
    notes: list[str] = field(default_factory=list)

    def path(self, rel: str) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def json(self, rel: str, obj: Any) -> None:
        self.path(rel).write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8")

    def jsonl(self, rel: str, rows: Iterable[dict]) -> None:
        self.path(rel).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    def images(self, jobs: Sequence[tuple[str, Callable[[], Image.Image]]], what: str) -> None:
        """Draw and save each (relative path, draw) job; PNG or JPEG (quality 95) by suffix."""
        it: Iterable = jobs
        if self.progress:
            from cir_core.progress import bar

            it = bar(jobs, unit="image", desc=f"rendering {what}")
        for rel, draw in it:
            img = draw()
            if rel.endswith(".png"):
                img.save(self.path(rel), format="PNG")
            else:
                img.save(self.path(rel), format="JPEG", quality=95)
            self.n_images += 1
