"""Where PACT's training batches come from: fresh world queries (`StreamSource`) or the embed
cache DiCE/PACE train on (`CacheSource`). Both draw from the loop's per-step `rng` alone, so a
batch is a pure function of (seed, step), and both return the same thing:
(v_r (B, D) float32 unit rows, B edit texts, caption embeddings (M, D) or None, M caption ids),
where the captions are the B target captions followed by every negative caption, embedded by the
frozen original text tower, and equal ids mean equal texts.
"""
from __future__ import annotations

import json
import random
from concurrent.futures import ProcessPoolExecutor
from itertools import islice
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import torch

from cir_core.encoder import Encoder, TensorEncoder
from cir_core.world import query_stream, render

CHUNK = 48  # queries per sub-stream (a multiple of the 6 edit types keeps every batch balanced)


def unit(x: np.ndarray) -> np.ndarray:
    """Rows renormalised to float32 unit length (the embed cache stores float16)."""
    return np.ascontiguousarray(x / np.linalg.norm(x, axis=1, keepdims=True), dtype=np.float32)


def draw_chunk(args: tuple) -> list[tuple]:
    """The first n queries of query_stream(seed), reference rendered: (edit, target caption,
    negatives, image array). Top-level so a process pool can run it."""
    seed, n, size = args
    return [(q.text, q.target_caption, q.negatives, np.asarray(render(q.reference, size, q.ref_seed)))
            for q in islice(query_stream(seed), n)]


class StreamSource:
    """Fresh queries every batch, drawn as CHUNK-sized sub-streams inline or in a process pool
    (sampling a query costs ~6 ms and a 224 px render ~6 ms: ~6 s per 512 batch on one core);
    the data depend on the seeds alone, never on the number of workers. References and captions
    are encoded now by the frozen backbone (in bf16 when `autocast`)."""

    def __init__(self, backbone: Encoder, workers: int = 0, autocast: bool = False):
        self.backbone, self.autocast = backbone, autocast
        self.pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn")) if workers > 0 else None

    def rows(self, rng: random.Random, b: int) -> list[tuple]:
        jobs = [(rng.randrange(1 << 31), min(CHUNK, b - i), self.backbone.image_size)
                for i in range(0, b, CHUNK)]
        chunks = self.pool.map(draw_chunk, jobs) if self.pool else map(draw_chunk, jobs)
        return [row for chunk in chunks for row in chunk]

    def draw(self, rng: random.Random, b: int, captions: bool) -> tuple:
        from PIL import Image

        bb, rows = self.backbone, self.rows(rng, b)
        edits = [r[0] for r in rows]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.autocast):
            refs = bb.encode_images([Image.fromarray(r[3]) for r in rows], batch_size=256)
            if not captions:
                return refs, edits, None, None
            texts = [r[1] for r in rows] + [n for r in rows for n in r[2]]
            ids = {t: i for i, t in enumerate(dict.fromkeys(texts))}
            return refs, edits, bb.encode_texts(texts), [ids[t] for t in texts]


class CacheSource:
    """Rows of an embed cache: the first `n_train` queries of the same stream (`data="world"`),
    encoded once per backbone and shared with DiCE/PACE (same data, no per-step encoding), or the
    first `n_train` ITT triplets of a real source (`data="itt:FILE"`)."""

    def __init__(self, backbone: TensorEncoder, n_train: int, data_seed: int = 0, root: str | None = None,
                 workers: int = 0, data: str = "world", image_root: str | None = None):
        from .train_data import load_train_cache

        self.cache = load_train_cache(backbone, n_train, data_seed, Path(root) if root else None, data=data,
                                      image_root=image_root, workers=workers)
        if not self.cache.has_target_captions:
            raise SystemExit(f"PACT trains on (image, edit, target caption) triplets; data={data!r} has no "
                             "target captions: use itt:FILE (training/build_itt makes one from captions)")
        self.texts = json.loads((self.cache.folder / "texts.json").read_text())

    def draw(self, rng: random.Random, b: int, captions: bool) -> tuple:
        cache = self.cache
        if b > len(cache):
            raise SystemExit(f"batch_size {b} exceeds n_train {len(cache)}")
        idx = np.asarray(rng.sample(range(len(cache)), b))
        refs = unit(cache.image("ref", idx))
        edits = [self.texts[i] for i in cache.edit[idx]]
        if not captions:
            return refs, edits, None, None
        negs = [cache.neg_idx[cache.neg_off[i]:cache.neg_off[i + 1]] for i in idx]
        rows = np.concatenate([cache.target_caption[idx], *negs])  # texts are unique: row = text
        return refs, edits, unit(cache.text(rows)), rows.tolist()
