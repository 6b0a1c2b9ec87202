"""FashionIQ (Wu et al., CVPR 2021), validation protocol of the published evaluation code. The
files, their checks and the image rule (images/<name>.jpg, another extension only when no .jpg
exists) are the format's (`cir_core.formats.fashioniq`).

Images are decoded as the official loaders decode them (no EXIF transposition). Each category
ranks its own split gallery (the reference is not removed, as in the official code). Metrics:
R@10 and R@50 per category and their mean over the categories evaluated; every category is
required unless `subset=` names some (the table's protocol line then says so).

Text protocol (`protocol=`), because published code disagrees:

- `clip4cir` (default): one order, "{c1.strip('.?, ').capitalize()} and {c2.strip('.?, ')}"
  (ABaldrati/CLIP4Cir `src/validate.py`); the dataset's own start kit also joins caption 1, then
  caption 2 (`start_kit/data_loader.py`: tokens of c1 + `<and>` + tokens of c2).
- `both-orders`: "{c1} and {c2}" and "{c2} and {c1}" (each `strip('.?, ')`) composed separately,
  the two queries averaged and normalised (miccunifi/SEARLE `src/validate.py`
  `fiq_generate_val_predictions`; navervision/lincir `validate.py` the same). Per-category R@10
  differs by up to ~1.3 points between the two.
- `pic2word`: one order, "{c2} and {c1}", captions as given (google-research/
  composed_image_retrieval `src/data.py`: `'a photo of * , {} and {}'.format(cap2, cap1)`).
- `authors`: each method with its authors' own form (`Method.authors_protocols["fashioniq"]`:
  Pic2Word `pic2word`, SEARLE and LinCIR `both-orders`), every other method `clip4cir`; each
  result says which form it used (`extra["fashioniq_text"]`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cir_core.formats import fashioniq as fiq_format
from cir_core.formats.fashioniq import CATEGORIES, join_captions
from cir_core.gallery import Gallery, GalleryItem
from cir_core.metrics import recall_at_k
from cir_core.search.searcher import StoreArray

from .common import (
    BenchmarkError,
    BenchmarkResult,
    Composed,
    Embedded,
    ScoreOpts,
    StoredGallery,
    compose_queries,
    parse_subset,
    pick,
    rank_queries,
    refs_at,
)
from .registry import register_benchmark

KS = (10, 50)
PROTOCOLS = {
    "clip4cir": "clip4cir: one caption order, '{c1.capitalize()} and {c2}' (CLIP4Cir; the start kit's order)",
    "both-orders": "both-orders: '{c1} and {c2}' and '{c2} and {c1}' composed apart, queries averaged (SEARLE)",
    "pic2word": "pic2word: one caption order, '{c2} and {c1}' as given (Pic2Word)",
    "authors": "authors: each method's authors' own text (Pic2Word: pic2word; SEARLE, LinCIR: both-orders), "
               "else clip4cir",
}
DEFAULT_PROTOCOL = "clip4cir"


def texts_for(captions: list[str], protocol: str) -> list[str]:
    """The query text(s) of one triplet under `protocol` (several are composed and averaged)."""
    c1, c2 = captions
    if protocol == "clip4cir":
        return [join_captions(c1, c2)]
    if protocol == "pic2word":
        return [f"{c2} and {c1}"]
    if protocol != "both-orders":
        raise BenchmarkError(f"no FashionIQ text form {protocol!r}; forms: clip4cir, both-orders, pic2word")
    a, b = c1.strip(".?, "), c2.strip(".?, ")
    return [f"{a} and {b}", f"{b} and {a}"]


@dataclass
class Category:
    name: str
    gallery: Gallery
    texts: list[list[str]]  # under the benchmark's text protocol (`authors`: clip4cir)
    captions: list[list[str]]  # each triplet's two captions, as in the file
    ref_rows: np.ndarray  # rows of [gallery; ref_gallery]
    target_rows: np.ndarray
    ref_gallery: Gallery  # references missing from the split gallery (usually none)


@dataclass
class FashionIQBench:
    categories: list[Category]
    text_protocol: str = DEFAULT_PROTOCOL
    subset: bool = False  # True: the user chose the categories
    split: str = "val"
    name: str = "fashioniq"
    labelled: bool = True

    @property
    def protocol(self) -> str:
        names = ", ".join(c.name for c in self.categories)
        cats = (f"subset of categories: {names} (avg over these only)" if self.subset
                else f"categories: {names}")
        return f"{PROTOCOLS[self.text_protocol]}; reference not removed; {cats}"

    def galleries(self) -> dict[str, Gallery]:
        out = {}
        for c in self.categories:
            out[c.name] = c.gallery
            if len(c.ref_gallery):
                out[c.name + "-refs"] = c.ref_gallery
        return out

    def n_queries(self) -> int:
        return sum(len(c.texts) for c in self.categories)

    def text_form(self, method) -> str:
        """The text form `method`'s queries take under this protocol."""
        return authors_form(method) if self.text_protocol == "authors" else self.text_protocol

    def compose(self, method, data: Embedded) -> dict[str, Composed]:
        form, out = self.text_form(method), {}
        for c in self.categories:
            texts = c.texts if form == self.text_protocol else [texts_for(two, form) for two in c.captions]
            out[c.name] = compose_queries(method, refs_at(pool(data.emb, c), pool_norms(data.norms, c), c.ref_rows),
                                          texts)
        return out

    def score(self, method, composed: dict[str, Composed], data: Embedded, opts: ScoreOpts) -> BenchmarkResult:
        metrics: dict[str, float] = {}
        top = {}
        form = self.text_form(method)
        for c in self.categories:
            g, q = data.emb[c.name], composed[c.name]
            refs = pool(data.emb, c)[c.ref_rows]
            ranked = rank_queries(method, q.q, q.q_empty, refs, g, opts, None, max(KS)).ids
            r = recall_at_k(ranked, c.target_rows, [k for k in KS if k <= ranked.shape[1]])
            metrics.update({f"{c.name} {k}": v for k, v in r.items()})
            ids = c.gallery.ids
            top.update({f"{c.name}/{i}": [ids[j] for j in row] for i, row in enumerate(ranked)})
        for k in KS:
            vals = [metrics[f"{c.name} R@{k}"] for c in self.categories if f"{c.name} R@{k}" in metrics]
            if vals:
                metrics[f"avg R@{k}"] = float(np.mean(vals))
        if all(f"avg R@{k}" in metrics for k in KS):
            metrics["avg"] = float(np.mean([metrics[f"avg R@{k}"] for k in KS]))
        extra = {"fashioniq_text": form} if self.text_protocol == "authors" else {}
        return BenchmarkResult(metrics, extra=extra, top=top)


def authors_form(method) -> str:
    """The FashionIQ text form `method`'s authors evaluate with (`clip4cir` when they publish none)."""
    return getattr(type(method), "authors_protocols", {}).get("fashioniq", DEFAULT_PROTOCOL)


def pool(emb: Mapping[str, np.ndarray | StoreArray], c: Category) -> np.ndarray | StoreArray:
    """Embeddings of [gallery; ref_gallery] for category `c` (the rows `ref_rows` index)."""
    return _joined(emb[c.name], emb[c.name + "-refs"], c) if len(c.ref_gallery) else emb[c.name]


def pool_norms(norms: Mapping[str, np.ndarray | StoreArray] | None, c: Category) -> np.ndarray | StoreArray | None:
    """Raw norms of [gallery; ref_gallery] for category `c`, when both are known."""
    if not norms or c.name not in norms:
        return None
    if not len(c.ref_gallery):
        return norms[c.name]
    extra = norms.get(c.name + "-refs")
    return None if extra is None else _joined(norms[c.name], extra, c)


def _joined(gallery: np.ndarray | StoreArray, refs: np.ndarray | StoreArray, c: Category) -> np.ndarray:
    if isinstance(gallery, StoreArray) or isinstance(refs, StoreArray):  # two galleries: never one store's
        raise BenchmarkError(f"FashionIQ {c.name}: its gallery and reference gallery cannot be searched in a "
                             "vector store (it holds one gallery)")
    return np.concatenate([gallery, refs])


def category(files: fiq_format.FIQCategory, protocol: str, split: str) -> Category:
    """A category as read, with its galleries (split file; references outside it) and texts."""
    cat, n = files.name, len(files.names)
    form = DEFAULT_PROTOCOL if protocol == "authors" else protocol
    pos = {nm: i for i, nm in enumerate(files.names + files.extra)}
    gallery = StoredGallery(f"fashioniq-{cat}-{split}",
                            [GalleryItem(nm, p, {}) for nm, p in zip(files.names, files.paths[:n])])
    ref_gallery = StoredGallery(f"fashioniq-{cat}-{split}-refs",
                                [GalleryItem(nm, p, {}) for nm, p in zip(files.extra, files.paths[n:])])
    trips = files.triplets
    return Category(cat, gallery, [texts_for(list(t.captions), form) for t in trips], [list(t.captions) for t in trips],
                    np.array([pos[t.candidate] for t in trips], np.int64),
                    np.array([pos[t.target] for t in trips], np.int64), ref_gallery)


@register_benchmark("fashioniq", "FashionIQ val: R@10/50 per category")
def load(root: str | Path, split: str = "val", protocol: str | None = None,
         subset: str | tuple[str, ...] | None = None) -> FashionIQBench:
    """FashionIQ validation (the only split with public targets; a test split whose triplets all
    carry `target`, as the world's export does, is scored too) from ROOT, validated: every
    category, or the `subset` named ('dress,toptee'); `protocol` clip4cir (default), both-orders,
    pic2word or authors (each method its authors' own)."""
    if split not in ("val", "test"):
        raise BenchmarkError(f"FashionIQ is evaluated on its val split (test targets are not public), not {split!r}")
    root = Path(root).expanduser()
    text = pick(protocol, tuple(PROTOCOLS), "FashionIQ --protocol", DEFAULT_PROTOCOL)
    chosen = parse_subset(subset, CATEGORIES, "category")
    hint = "" if chosen else " (to evaluate only some categories, name them: --subset dress,toptee)"
    cats = fiq_format.read(root, split, chosen or CATEGORIES, hint)
    return FashionIQBench([category(c, text, split) for c in cats], text, chosen is not None, split)
