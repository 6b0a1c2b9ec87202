"""The benchmark gallery: each query's exact target among hard distractors, CIRR/CIRCO style.

Per query the gallery holds the reference, the target, and five hard distractors that form the
query's subset of six with the target: the edit satisfied by other characters (x3, or x4 when no failed
modification exists), the
reference itself re-rendered (same character, nothing changed), and a failed modification (same
character, wrong value or a change missing). Random filler scenes pad the gallery. Every gallery
scene whose key equals the target's counts as a ground truth for mAP.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, replace
from functools import cached_property

from PIL import Image

from .data import WorldQuery, make_queries, other_identities, showcase_queries
from .language import apply_edit, possible_edits
from .render import RENDER_VERSION, render
from .spec import Scene, sample_scene

SUBSET_SIZE = 6


@dataclass(frozen=True)
class WorldItem:
    item_id: str
    scene: Scene
    seed: int

    def fingerprint(self, size: int) -> str:
        spec = json.dumps(self.scene.to_dict(), sort_keys=True)
        return hashlib.sha1(f"{spec}|{self.seed}|{size}|v{RENDER_VERSION}".encode()).hexdigest()

    def image(self, size: int = 64) -> Image.Image:
        return render(self.scene, size, self.seed)


@dataclass
class WorldBenchmark:
    split: str
    queries: list[WorldQuery]
    items: list[WorldItem]
    reference_idx: list[int]  # gallery index of each query's reference
    target_idx: list[int]  # the one target R@K counts
    subsets: list[list[int]]  # target + 5 hard distractors

    @cached_property
    def _by_key(self) -> tuple[dict, dict]:
        full: dict = {}
        noid: dict = {}
        for i, it in enumerate(self.items):
            full.setdefault(it.scene.key(), []).append(i)
            noid.setdefault(it.scene.key_without_identity(), []).append(i)
        return full, noid

    def gt_sets(self) -> list[set[int]]:
        """Every exact match of each query's target (reference excluded)."""
        full = self._by_key[0]
        return [set(full[q.target.key()]) - {r} for q, r in zip(self.queries, self.reference_idx)]

    def edit_ok_sets(self) -> list[set[int]]:
        """Gallery items that satisfy each query's edit, whatever the character."""
        noid = self._by_key[1]
        return [set(noid[q.target.key_without_identity()]) - {r}
                for q, r in zip(self.queries, self.reference_idx)]

    def identities(self) -> list[int]:
        return [it.scene.character.identity for it in self.items]

    def gallery(self, size: int = 64):
        """The benchmark as a `cir_core.gallery.Gallery`: images are rendered on demand (at
        `size` for the encoder, at any size for display), fingerprinted by scene + seed + size."""
        from cir_core.gallery import Gallery, GalleryItem

        items = [GalleryItem(it.item_id, None, {"fingerprint": it.fingerprint(size), "index": i,
                                                 "identity": it.scene.character.identity})
                 for i, it in enumerate(self.items)]

        def image_fn(item: GalleryItem, s: int | None) -> Image.Image:
            return self.items[item.meta["index"]].image(s or size)

        return Gallery.from_items(f"world-{self.split}-{len(self.queries)}", items, image_fn)


def _failed(q: WorldQuery, rng: random.Random) -> Scene | None:
    """A same-character scene where the modification failed: a change missing or a wrong value."""
    if len(q.edits) > 1:
        cur = q.reference
        skip = rng.randrange(len(q.edits))
        for i, e in enumerate(q.edits):
            if i != skip:
                try:
                    cur = apply_edit(cur, e)
                except ValueError:  # a later edit depended on the skipped one
                    pass
        return cur if cur.key() not in (q.target.key(), q.reference.key()) else None
    e = q.edits[0]
    wrong = [apply_edit(q.reference, w) for w in possible_edits(q.reference, (e.op,))
             if w.target == e.target and w != e]
    wrong = [w for w in wrong if w.key() != q.target.key()]
    return rng.choice(wrong) if wrong else None


def build_benchmark(split: str = "test", n_queries: int = 1000, n_filler: int | None = None,
                    seed: int | None = None, showcase: int = 0) -> WorldBenchmark:
    """Deterministic benchmark of `split` with `n_queries` queries (gallery ≈ 8 × n_queries).
    `showcase` > 0 puts that many demo queries (`showcase_queries`) first: the app's gallery
    uses them; evaluation keeps the default 0."""
    queries = showcase_queries(showcase) + make_queries(split, n_queries, seed)
    rng = random.Random(f"gallery:{split}:{n_queries}:{seed}" + (f":{showcase}" if showcase else ""))
    items: list[WorldItem] = []
    ref_idx, tgt_idx, subsets = [], [], []

    def add(scene: Scene, s: int | None = None) -> int:
        items.append(WorldItem(f"{split}/{len(items):06d}", scene, rng.randrange(1 << 30) if s is None else s))
        return len(items) - 1

    for q in queries:
        ref_idx.append(add(q.reference, q.ref_seed))
        t = add(q.target, q.target_seed)
        tgt_idx.append(t)
        ident = q.reference.character.identity
        others = [replace(q.target, character=replace(q.target.character, identity=i))
                  for i in other_identities(ident, 4, rng)]
        failed = _failed(q, rng)
        distractors = others[:3] + [q.reference, failed if failed is not None else others[3]]
        sub = [t] + [add(s) for s in distractors]
        rng.shuffle(sub)
        subsets.append(sub)
    for _ in range(n_queries if n_filler is None else n_filler):
        add(sample_scene(rng))
    return WorldBenchmark(split, queries, items, ref_idx, tgt_idx, subsets)
