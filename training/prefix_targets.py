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

from cir_core.encoder import Encoder
from cir_core.fileio import atomic_write_path
from cir_core.progress import bar as progress_bar
from cir_core.text import split_sentences
from cir_core.world.films.language import apply_film_edit
from cir_core.world.films.queries import FilmQuery
from cir_core.world.films.stream import render_item, training_queries
from cir_core.world.language import apply_edit

from .embed_cache import TrainEmbeddings, scene_hash

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

    def __init__(self, cache: TrainEmbeddings, backbone: Encoder, progress: bool = True):
        if getattr(cache, "source", "world") != "world":
            raise SystemExit(f"intermediate prefix targets exist only for the generated world's cache, not for "
                             f"{cache.source!r} data (its intermediate images are unknown): use prefix_target=final")
        path = Path(cache.folder) / FILE
        if not path.is_file():
            build(cache, backbone, path, progress)
        with np.load(path) as z:
            self.img, self.key, self.off = z["img"], z["key"], z["off"]
            self.fallback = int(z["fallback"])
        if not np.array_equal(self.off, row_offsets(cache.n_sentences)):
            raise SystemExit(f"{path} does not fit its cache (rows per query differ): delete it to rebuild")

    def target(self, i: int, k: int) -> tuple[np.ndarray, int]:
        """(image embedding (D,) float32, key hash) of query i after its first k sentences."""
        j = int(self.off[i]) + k - 1
        if not 1 <= k < 1 + int(self.off[i + 1] - self.off[i]):
            raise ValueError(f"query {i} has no intermediate target after {k} sentences")
        return self.img[j].astype(np.float32), int(self.key[j])


def row_offsets(n_sentences: np.ndarray) -> np.ndarray:
    """(N+1,) where each query's rows start: n - 1 rows (k = 1..n-1) for a query of n sentences."""
    return np.concatenate([[0], np.cumsum(np.maximum(n_sentences - 1, 0))]).astype(np.int64)


def build(cache: TrainEmbeddings, backbone: Encoder, path: Path, progress: bool = True, chunk: int = 256) -> None:
    """Regenerate the cache's queries (its stream, seed and film share), draw and embed every
    intermediate state, write `path` atomically. A query whose chain does not reach its target
    keeps its final target in every row."""
    n_sent, off = cache.n_sentences, row_offsets(cache.n_sentences)
    img = np.empty((int(off[-1]), cache.dim), np.float16)
    keys = np.empty(int(off[-1]), np.int64)
    todo, fallback = [], 0  # (row, item, render seed) to draw
    stream = training_queries(int(cache.meta["seed"]), float(cache.meta.get("film_share", 0.5)))
    for i, q in enumerate(itertools.islice(stream, len(cache))):
        if n_sent[i] < 2:
            continue
        final = int(cache.tgt_key[i])
        if scene_hash(_final_key(q)) != final:  # the stream is not the cache's
            raise SystemExit(f"query {i} of the regenerated training stream is not the cache's (its target key "
                             f"differs): {cache.folder} was built by other code; rebuild the embed cache")
        states = intermediate_states(q)
        if states is None or states[-1][2] != final:  # the chain does not reach the target
            fallback += 1
            img[off[i]:off[i + 1]], keys[off[i]:off[i + 1]] = cache.tgt_img[i], final
            continue
        for k in range(1, int(n_sent[i])):
            item, seed, keys[off[i] + k - 1] = states[k - 1]
            todo.append((off[i] + k - 1, item, seed))
    bar = progress_bar(total=len(todo), disable=not progress, unit="image", desc="intermediate targets")
    for s in range(0, len(todo), chunk):
        part = todo[s:s + chunk]
        pics = [render_item(item, backbone.image_size, seed) for _, item, seed in part]
        img[[row for row, _, _ in part]] = backbone.encode_images(pics, batch_size=256).astype(np.float16)
        bar.update(len(part))
    bar.close()

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, img=img, key=keys, off=off, fallback=fallback)

    atomic_write_path(path, write)
    if fallback:
        print(f"prefix targets: {fallback} multi-sentence queries use their final target (sentences not one "
              "per edit, or the edits do not reach the target)", flush=True)


def _final_key(q: Any) -> tuple:
    return q.tgt_key if isinstance(q, FilmQuery) else q.target.key()
