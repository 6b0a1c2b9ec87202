"""The intermediate targets of the embed cache's multi-sentence queries: for query i with n
sentences (one per atomic edit) and 1 <= k < n, the image of the reference after its first k
edits, embedded with the cache's backbone. PACE's `prefix_target=intermediate` trains a prefix
of k sentences against it. Built once per cache, beside it (`prefix_targets-v1.npz`); rows of a
query whose sentences are not one per edit (or whose chain of edits does not apply) are the
final target, counted in the file's `fallback`.

World queries: the reference scene with edits 1..k applied (`apply_edit`), drawn with the
target's render seed. Film queries: the reference keyframe's frame with edits 1..k applied to
the query's character (`apply_film_edit`), drawn as the reference keyframe (its film's palette,
place and shot seeds), so only what the sentences said has changed.
"""
from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from cir_core.fileio import atomic_write_path
from cir_core.progress import bar as progress_bar
from cir_core.text import split_sentences
from cir_core.world.films.language import apply_film_edit
from cir_core.world.films.queries import FilmQuery
from cir_core.world.films.stream import render_item, training_queries
from cir_core.world.language import apply_edit

from .embed_cache import scene_hash

FILE = "prefix_targets-v1.npz"


def intermediate_states(q: Any) -> list[tuple[Any, int | None, int]] | None:
    """[(item, render seed, key hash)] after edits 1..k, k = 1..n (the last is the target), or
    None when the query's sentences are not one per edit or its chain does not apply."""
    if len(split_sentences(q.text) or [q.text]) != len(q.edits):
        return None
    out = []
    try:
        if isinstance(q, FilmQuery):
            frame = q.reference.state
            for e in q.edits:
                frame = apply_film_edit(frame, q.character, e)
                out.append((replace(q.reference, state=frame), None,
                            scene_hash((q.character, frame.key_for(q.character)))))
        else:
            scene = q.reference
            for e in q.edits:
                scene = apply_edit(scene, e)
                out.append((scene, q.target_seed, scene_hash(scene.key())))
    except ValueError:
        return None
    return out


class PrefixTargets:
    """`img` (M, D) float16 and `key` (M,) of every (query, k) with 1 <= k < n, query i's rows
    at off[i]:off[i+1] in order of k."""

    def __init__(self, cache: Any, backbone: Any, progress: bool = True):
        if getattr(cache, "source", "world") != "world":
            raise SystemExit(f"intermediate prefix targets exist only for the generated world's cache, not for "
                             f"{cache.source!r} data (its intermediate images are unknown): use prefix_target=final")
        path = Path(cache.folder) / FILE
        if not path.is_file():
            build(cache, backbone, path, progress)
        with np.load(path) as z:
            self.img, self.key, self.off = z["img"], z["key"], z["off"]
            self.fallback = int(z["fallback"])
        counts = np.maximum(cache.n_sentences - 1, 0)
        if len(self.off) != len(cache) + 1 or not np.array_equal(np.diff(self.off), counts):
            raise SystemExit(f"{path} does not fit its cache (rows per query differ): delete it to rebuild")

    def target(self, i: int, k: int) -> tuple[np.ndarray, int]:
        """(image embedding (D,) float32, key hash) of query i after its first k sentences."""
        j = int(self.off[i]) + k - 1
        if not 1 <= k < 1 + int(self.off[i + 1] - self.off[i]):
            raise ValueError(f"query {i} has no intermediate target after {k} sentences")
        return self.img[j].astype(np.float32), int(self.key[j])


def build(cache: Any, backbone: Any, path: Path, progress: bool = True, chunk: int = 256) -> None:
    """Regenerate the cache's queries (its stream, seed and film share), draw and embed every
    intermediate state, write `path` atomically."""
    n_sent = cache.n_sentences
    stream = training_queries(int(cache.meta["seed"]), float(cache.meta.get("film_share", 0.5)))
    items, keys, fallback = [], [], 0
    for i, q in enumerate(itertools.islice(stream, len(cache))):
        n = int(n_sent[i])
        if n < 2:
            continue
        if scene_hash(_final_key(q)) != int(cache.tgt_key[i]):  # the stream is not the cache's
            raise SystemExit(f"query {i} of the regenerated training stream is not the cache's (its target key "
                             f"differs): {cache.folder} was built by other code; rebuild the embed cache")
        states = intermediate_states(q)
        if states is not None and states[-1][2] != int(cache.tgt_key[i]):
            states = None  # the chain of edits does not reach the target: the final target stands in
        fallback += states is None
        for k in range(1, n):
            items.append(None if states is None else states[k - 1][:2])
            keys.append(int(cache.tgt_key[i]) if states is None else states[k - 1][2])
    img = np.empty((len(items), cache.dim), np.float16)
    bar = progress_bar(total=len(items), disable=not progress, unit="image", desc="intermediate targets")
    final_rows = _final_rows(cache, n_sent)
    for s in range(0, len(items), chunk):
        part = items[s:s + chunk]
        todo = [j for j, it in enumerate(part) if it is not None]
        if todo:
            pics = [render_item(part[j][0], backbone.image_size, part[j][1]) for j in todo]
            img[[s + j for j in todo]] = backbone.encode_images(pics, batch_size=256).astype(np.float16)
        for j, it in enumerate(part):
            if it is None:  # the final target stands in
                img[s + j] = cache.tgt_img[final_rows[s + j]]
        bar.update(len(part))
    bar.close()
    off = np.concatenate([[0], np.cumsum(np.maximum(n_sent - 1, 0))]).astype(np.int64)
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, img=img, key=np.asarray(keys, np.int64), off=off, fallback=fallback)

    atomic_write_path(path, write)
    if fallback:
        print(f"prefix targets: {fallback} multi-sentence queries use their final target (sentences not one "
              "per edit, or the edits do not reach the target)", flush=True)


def _final_key(q: Any) -> tuple:
    return q.tgt_key if isinstance(q, FilmQuery) else q.target.key()


def _final_rows(cache: Any, n_sent: np.ndarray) -> np.ndarray:
    """For every (query, k) row, the query's index (its final target's row in the cache)."""
    return np.repeat(np.arange(len(cache)), np.maximum(n_sent - 1, 0))
