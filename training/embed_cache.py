"""Frozen embeddings of N training queries of the world's stream, built once per backbone and reused.

The stream interleaves the world's queries and the films' (`cir_core.world.films.stream`,
`--films` of them: 0.5 by default, every other query).

DiCE and PACE train only small heads on top of frozen towers, so every epoch would re-encode the
same images and texts: encode them once here and train on the arrays (cheap on any machine).

    python -m training.embed_cache --n 20000 [--backbone local-dir:...] [--seed 0] [--films 0.5] [--threads 1]

Layout of `<root>/<key>/` (key = backbone id, N, seed, RENDER_VERSION, image size, a fingerprint
of the world's first queries, this format's version):
  ref_img.npy, tgt_img.npy   (N, D) float16   reference / target image embeddings
  texts.npy (U, D) float16 + texts.json       every distinct text, encoded once
  ref_caption.npy, edit.npy, target_caption.npy   (N,) int32 rows of texts.npy
  neg_idx.npy + neg_off.npy, sent_idx.npy + sent_off.npy   ragged: query i owns idx[off[i]:off[i+1]]
  edit_type.npy (N,) int8 (index into meta's edit_types), ref_key.npy / tgt_key.npy (N,) int64
  ground-truth keys (a world scene's key; a film query's (actor, key for the actor))
  meta.json
Sentences are `split_sentences(q.text)` (what PACE sees at inference): one per atomic edit for
"long" queries, the edit itself otherwise.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from cir_core.encoder import Encoder
from cir_core.fileio import atomic_folder, loads_json
from cir_core.paths import cache_dir
from cir_core.progress import bar as progress_bar
from cir_core.settings import add_backbone_args, add_device_arg, add_seed_arg
from cir_core.text import split_sentences
from cir_core.world.films.film import FILM_VERSION
from cir_core.world.films.render import FILM_RENDER_VERSION
from cir_core.world.films.stream import (
    FILM_SHARE,
    TRAIN_TYPES,
    query_keys,
    query_sources,
    render_item,
    training_queries,
)
from cir_core.world.render import RENDER_VERSION

from .registry import Trainer, register_trainer

FORMAT_VERSION = 2  # 2: the stream interleaves film queries (issue 25)
# Not a trainer but a build step: the frozen embeddings DiCE, PACE and PACT's targets train on.
register_trainer(Trainer("embed-cache", "training.embed_cache", args=("--n", "20000", "--threads", "1"),
                         stage=1))
ARRAYS = ("ref_img", "tgt_img", "texts", "ref_caption", "edit", "target_caption", "neg_idx",
          "neg_off", "sent_idx", "sent_off", "edit_type", "ref_key", "tgt_key")


def scene_hash(key: tuple) -> int:
    """A stable int64 of a scene key (equal keys = the same scene, whatever the render)."""
    return int.from_bytes(hashlib.sha1(repr(key).encode()).digest()[:8], "little", signed=True)


def world_fingerprint(seed: int, k: int = 8, films: float = FILM_SHARE) -> str:
    """Changes when the world's or the films' language or sampling changes (the render versions
    cover pixels)."""
    qs = itertools.islice(training_queries(seed, films), k)
    return hashlib.sha1("|".join(f"{q.text}#{q.target_caption}#{query_keys(q)[1]}" for q in qs)
                        .encode()).hexdigest()[:10]


def cache_key(backbone: Encoder, n: int, seed: int, films: float = FILM_SHARE) -> str:
    ident = f"{backbone.id}|{n}|{seed}|r{RENDER_VERSION}|fr{FILM_RENDER_VERSION}|fv{FILM_VERSION}|" \
            f"films{films}|{backbone.image_size}|{world_fingerprint(seed, films=films)}|f{FORMAT_VERSION}"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in backbone.id)[:60]
    return f"{safe}-n{n}-s{seed}-{hashlib.sha1(ident.encode()).hexdigest()[:10]}"


class TrainEmbeddings:
    """The loaded cache. Gathered rows are float32, unit norm up to float16 storage (~1e-3)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.meta = loads_json((self.folder / "meta.json").read_text())
        a = {k: np.load(self.folder / f"{k}.npy") for k in ARRAYS}
        self.ref_img, self.tgt_img, self.texts = a["ref_img"], a["tgt_img"], a["texts"]
        self.ref_caption, self.edit, self.target_caption = a["ref_caption"], a["edit"], a["target_caption"]
        self.neg_idx, self.neg_off = a["neg_idx"], a["neg_off"]
        self.sent_idx, self.sent_off = a["sent_idx"], a["sent_off"]
        self.edit_type, self.ref_key, self.tgt_key = a["edit_type"], a["ref_key"], a["tgt_key"]
        self.n, self.dim = int(self.meta["n"]), int(self.meta["dim"])

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"TrainEmbeddings(n={self.n}, dim={self.dim}, texts={len(self.texts)}, folder={self.folder})"

    @property
    def has_ref_captions(self) -> bool:
        """Every query has a reference caption (the world's and ITT caches do; CIRR's do not)."""
        return bool(self.meta.get("ref_captions", True))

    @property
    def has_target_captions(self) -> bool:
        return bool(self.meta.get("target_captions", True))

    @property
    def has_target_images(self) -> bool:
        """Every query has a target image (the world's, CIRR's, FashionIQ's; not ITT's)."""
        return bool(self.meta.get("target_images", True))

    @property
    def source(self) -> str:
        return str(self.meta.get("source", "world"))

    @property
    def n_sentences(self) -> np.ndarray:
        return np.diff(self.sent_off)

    def text(self, rows: np.ndarray) -> np.ndarray:
        """(…, D) float32 embeddings of text rows (indices into texts.npy)."""
        return self.texts[rows].astype(np.float32)

    def image(self, which: str, idx: np.ndarray) -> np.ndarray:
        return (self.ref_img if which == "ref" else self.tgt_img)[idx].astype(np.float32)

    def sentences(self, i: int) -> np.ndarray:
        """(n_i, D) embeddings of query i's sentences."""
        return self.text(self.sent_idx[self.sent_off[i]:self.sent_off[i + 1]])

    def negatives(self, i: int) -> np.ndarray:
        """(m_i, D) embeddings of query i's negative captions (m_i may be 0)."""
        return self.text(self.neg_idx[self.neg_off[i]:self.neg_off[i + 1]])

    def type_mask(self, *types: str) -> np.ndarray:
        known = list(self.meta.get("edit_types", TRAIN_TYPES))
        codes = [known.index(t) for t in types]
        return np.isin(self.edit_type, codes)


def _render_pair(args: tuple) -> tuple:
    ref, rs, tgt, ts, size = args
    return render_item(ref, size, rs), render_item(tgt, size, ts)


def encode_texts_by_length(backbone: Encoder, texts: list[str]) -> np.ndarray:
    """encode_texts in length order: the text tower trims padding per batch, so batching
    sentences with sentences and captions with captions halves the cost."""
    order = np.argsort([len(t) for t in texts], kind="stable")
    emb = backbone.encode_texts([texts[i] for i in order], batch_size=256)
    out = np.empty_like(emb, dtype=np.float16)
    out[order] = emb
    return out


class TextFields:
    """The per-query text indices and keys of the cache layout, filled one query at a time;
    `tid` maps a text to its row in the cache's text table."""

    KEYS = ("ref_caption", "edit", "target_caption", "neg_idx", "neg_len", "sent_idx", "sent_len",
            "edit_type", "ref_key", "tgt_key")

    def __init__(self, tid: Callable[[Any], int]) -> None:
        self.tid, self.f = tid, {k: [] for k in self.KEYS}

    def add(self, ref_caption: Any, edit: str, target_caption: Any, negatives: Sequence[str],
            edit_type: int, ref_key: int, tgt_key: int) -> None:
        f, tid = self.f, self.tid
        sents = split_sentences(edit) or [edit]
        f["ref_caption"].append(tid(ref_caption))
        f["edit"].append(tid(edit))
        f["target_caption"].append(tid(target_caption))
        f["neg_idx"] += [tid(x) for x in negatives]
        f["neg_len"].append(len(negatives))
        f["sent_idx"] += [tid(x) for x in sents]
        f["sent_len"].append(len(sents))
        f["edit_type"].append(edit_type)
        f["ref_key"].append(ref_key)
        f["tgt_key"].append(tgt_key)

    def arrays(self) -> dict[str, np.ndarray]:
        """The layout's index arrays (every one of ARRAYS but the embeddings and texts)."""
        f = self.f
        return {**{k: np.asarray(f[k], np.int32) for k in ("ref_caption", "edit", "target_caption",
                                                            "neg_idx", "sent_idx")},
                "neg_off": np.concatenate([[0], np.cumsum(f["neg_len"])]).astype(np.int64),
                "sent_off": np.concatenate([[0], np.cumsum(f["sent_len"])]).astype(np.int64),
                "edit_type": np.asarray(f["edit_type"], np.int8),
                "ref_key": np.asarray(f["ref_key"], np.int64), "tgt_key": np.asarray(f["tgt_key"], np.int64)}


def write_cache(folder: Path, arrays: dict[str, np.ndarray], texts: list[str], meta: dict) -> None:
    """The cache's files, written into a new folder that takes `folder`'s place in one step
    (`atomic_folder`): a reader sees the whole cache or none of it."""
    def write(tmp: Path) -> None:
        for k, v in arrays.items():
            np.save(tmp / f"{k}.npy", v)
        (tmp / "texts.json").write_text(json.dumps(texts))
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))

    folder.parent.mkdir(parents=True, exist_ok=True)
    atomic_folder(folder, write, durable=False)  # a cache: a crash may lose it, never half of it


def build_train_cache(backbone: Encoder, n: int, seed: int = 0, root: Path | None = None,
                      chunk: int = 512, workers: int = 0, progress: bool = True,
                      films: float = FILM_SHARE) -> TrainEmbeddings:
    """Encode the first `n` queries of the trainers' world stream (`training_queries(seed,
    films)`: world and film queries) with `backbone` (images rendered at `backbone.image_size`)
    and write the cache; a finished cache is reused, never rebuilt."""
    root = Path(root) if root is not None else cache_dir() / "train"
    folder = root / cache_key(backbone, n, seed, films)
    if (folder / "meta.json").is_file():
        return TrainEmbeddings(folder)
    t0, size = time.time(), backbone.image_size
    text_ids: dict[str, int] = {}
    text_rows: list[np.ndarray] = []
    ref_img, tgt_img = [], []
    fields = TextFields(lambda t: text_ids.setdefault(t, len(text_ids)))

    pool = ProcessPoolExecutor(workers) if workers > 0 else None
    stream = training_queries(seed, films)
    n_film = 0
    bar = progress_bar(total=n, disable=not progress, unit="query", desc=f"train cache n={n}")
    try:
        for start in range(0, n, chunk):
            qs = list(itertools.islice(stream, min(chunk, n - start)))
            args = [(*query_sources(q)[0], *query_sources(q)[1], size) for q in qs]
            n_film += sum(a[1] is None for a in args)  # a keyframe carries its own seed
            pairs = list(pool.map(_render_pair, args, chunksize=16) if pool else map(_render_pair, args))
            ref_img.append(backbone.encode_images([p[0] for p in pairs], batch_size=256).astype(np.float16))
            tgt_img.append(backbone.encode_images([p[1] for p in pairs], batch_size=256).astype(np.float16))
            n_known = len(text_ids)
            for q in qs:
                rk, tk = query_keys(q)
                fields.add(q.ref_caption, q.text, q.target_caption, q.negatives, TRAIN_TYPES.index(q.edit_type),
                           scene_hash(rk), scene_hash(tk))
            new = list(text_ids)[n_known:]  # dicts keep insertion order: the texts first seen now
            if new:
                text_rows.append(encode_texts_by_length(backbone, new))
            bar.update(len(qs))
            bar.set_postfix(texts=len(text_ids))
    finally:
        bar.close()
        if pool:
            pool.shutdown()
    arrays = {
        "ref_img": np.concatenate(ref_img), "tgt_img": np.concatenate(tgt_img),
        "texts": np.concatenate(text_rows), **fields.arrays(),
    }
    meta = {"backbone": backbone.id, "dim": backbone.dim, "n": n, "seed": seed,
            "render_version": RENDER_VERSION, "image_size": size, "format": FORMAT_VERSION,
            "world_fingerprint": world_fingerprint(seed, films=films), "n_texts": len(text_ids),
            "n_sentences": int(arrays["sent_off"][-1]), "edit_types": list(TRAIN_TYPES),
            "film_share": films, "n_film_queries": n_film,
            "build_seconds": round(time.time() - t0, 1)}
    write_cache(folder, arrays, list(text_ids), meta)
    return TrainEmbeddings(folder)


def main(argv: list[str] | None = None) -> None:
    from cir_core.backbone import DEFAULT_MODEL, load_backbone

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_backbone_args(ap, default=DEFAULT_MODEL)
    add_device_arg(ap)
    ap.add_argument("--n", type=int, default=20000)
    add_seed_arg(ap, what="the training queries' stream")
    ap.add_argument("--films", type=float, default=FILM_SHARE, help="share of film queries in the stream")
    ap.add_argument("--root", type=Path, default=None, help="default: cir_core.paths.cache_dir()/train")
    ap.add_argument("--workers", type=int, default=0, help="render processes (0: render inline)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch CPU threads (0: torch's default; 1 is faster when another process holds a core)")
    args = ap.parse_args(argv)
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    bb = load_backbone(args.backbone, args.pretrained, device=args.device)
    print(build_train_cache(bb, args.n, args.seed, args.root, workers=args.workers, films=args.films))


if __name__ == "__main__":
    main()
