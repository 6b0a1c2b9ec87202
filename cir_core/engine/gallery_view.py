"""`GalleryView`: the gallery a request searches, as the engine and the UI see it: its items,
embeddings (with raw feature norms; or a `VectorStore` that keeps them outside the process),
characters, captions, text search, thumbnails, the world's queries and their ground truth, and the
references a request starts from."""
from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from PIL import Image

from .. import timing
from ..character_mark import CharacterMark, draw_mark, mark_from
from ..encoder import Encoder
from ..errors import GalleryError, ImageLoadError, InputError
from ..gallery import Gallery, RemoteGallery
from ..imageio import load_image
from ..memo import LRU
from ..search.searcher import VectorStore
from .common import MAX_UPLOAD_PIXELS, normalise_text
from .results import Reference

THUMBNAILS = 1024  # display thumbnails kept
UPLOADS = 8  # encoded uploads kept (the same file uploaded again is not re-encoded)


class GalleryView:
    """One gallery and everything a request reads of it. `embeddings` (N, D) unit rows aligned
    with `gallery.items`, or a `VectorStore` holding them (then `store`, and `embeddings` is
    None: rows are read when a request needs them); `feature_norms` (N,) their raw norms (NaN:
    not recorded) or None; `bench` the benchmark whose gallery it is, if any: the world's
    (`domain` "world": queries, ground truth, scenes, characters, captions) or the film world's
    ("films": queries and ground truth; characters from the items). `self.bench` is the world
    benchmark only (what reads scenes); `self.queries` any benchmark's queries (examples, ground
    truth)."""

    def __init__(self, gallery: Gallery, embeddings: np.ndarray | VectorStore, encoder: Encoder, *,
                 feature_norms: np.ndarray | None = None, bench: Any = None, n_examples: int = 6):
        self.store: VectorStore | None
        emb: np.ndarray | None
        if isinstance(embeddings, VectorStore):
            self.store, emb = embeddings, None
            shape: tuple[int, ...] = (len(embeddings), int(embeddings.dim))
        else:
            self.store, emb = None, np.ascontiguousarray(embeddings, dtype=np.float32)
            shape = emb.shape
        if shape != (len(gallery), int(encoder.dim)):
            raise GalleryError(f"embeddings {shape} do not match gallery {gallery.name!r} "
                               f"({len(gallery)} items) x backbone dim {encoder.dim}")
        if feature_norms is not None and np.shape(feature_norms) != (len(gallery),):
            raise GalleryError(f"raw norms {np.shape(feature_norms)} do not match gallery {gallery.name!r} "
                               f"({len(gallery)} items)")
        # the world's benchmark says nothing (its source is the shipped split's key); the films' says "films"
        self.domain: str = getattr(bench, "domain", "world") if bench is not None else "images"
        self.gallery, self.embeddings, self.encoder = gallery, emb, encoder
        self.bench = bench if self.domain == "world" else None  # scenes, captions: the world's only
        self.queries = bench  # queries with ground truth: the world's or the films'
        self.feature_norms = None if feature_norms is None else np.asarray(feature_norms, np.float32)
        self.n_examples = n_examples
        self._thumbs: LRU[tuple[int, int], Image.Image] = LRU(THUMBNAILS)
        self._uploads: LRU[tuple, Reference] = LRU(UPLOADS)
        self._search_text: list[str] | None = None
        self._captions: list[str] | None = None
        self._queries_by_key: dict[tuple[int, str], int] = {}
        self._query_pos: dict[str, int] = {}
        self._gt: list[set[int]] = []
        if bench is not None:
            if len(bench.reference_idx) and max(bench.reference_idx) >= len(gallery):
                raise GalleryError(f"benchmark queries name rows past gallery {gallery.name!r} ({len(gallery)} items)")
            self._gt = bench.gt_sets()
            for qi, (q, r) in enumerate(zip(bench.queries, bench.reference_idx)):
                self._queries_by_key.setdefault((r, normalise_text(q.text)), qi)
                self._query_pos[q.query_id] = qi

    def __len__(self) -> int:
        return len(self.gallery)

    # -- gallery ---------------------------------------------------------------------------------
    def item_id(self, row: int) -> str:
        return self.gallery.items[row].id

    def row_of(self, item_id: str) -> int:
        try:
            return self.gallery.index_of(str(item_id).strip())
        except GalleryError:
            raise InputError(f"the gallery has no item {str(item_id).strip()!r}") from None

    def character(self, row: int) -> str | None:
        """The name of the character shown by gallery item `row`, when the gallery knows it."""
        if self.bench is not None:
            return self.bench.items[row].scene.character.name
        meta = self.gallery.items[row].meta
        for key in ("character", "identity", "person"):
            if meta.get(key) not in (None, ""):
                return str(meta[key])
        if meta.get("character_ids"):  # MovieNet frames: every character in the shot
            return ", ".join(map(str, meta["character_ids"]))
        return None

    def mark(self, row: int) -> CharacterMark | None:
        """The box (and name) of the character a MovieNet reference frame's queries follow
        (`reference_character` in the item's meta); None for other items."""
        meta = self.gallery.items[row].meta
        return mark_from(meta.get("reference_character"), meta.get("resolution"))

    def shows(self, row: int, pid: str) -> bool:
        """Whether item `row` shows the credited cast member `pid` (MovieNet frames)."""
        return pid in (self.gallery.items[row].meta.get("character_ids") or ())

    def caption(self, row: int) -> str:
        if self.bench is None:  # the item's own column: no list of every caption
            meta = self.gallery.items[row].meta
            return str(meta.get("caption") or meta.get("text") or "")
        if self._captions is None:
            self._captions = self._make_captions(self.bench)
        return self._captions[row]

    @staticmethod
    def _make_captions(bench: Any) -> list[str]:
        """Every item's caption, generated from the world benchmark `bench`'s scenes."""
        from ..world import caption

        return [caption(it.scene, random.Random(it.item_id)) for it in bench.items]

    def prefetch(self, rows: Sequence[int]) -> None:
        """Read the items at `rows` in one call when they live in a store (a page, a ranking)."""
        if isinstance(self.gallery, RemoteGallery):
            self.gallery.prefetch([int(r) for r in rows if int(r) >= 0])

    def search(self, query: str) -> Sequence[int]:
        """Gallery rows whose id, caption or character contain every word of `query` (any case);
        in a store's gallery, the store finds them (at most 10,000)."""
        words = str(query).lower().split()
        if isinstance(self.gallery, RemoteGallery):
            return self.gallery.find(words) if words else range(len(self.gallery))
        if not words:
            return list(range(len(self.gallery)))
        if self._search_text is None:
            self._search_text = [f"{it.id} {self.caption(i)} {self.character(i) or ''}".lower()
                                 for i, it in enumerate(self.gallery.items)]
        return [i for i, s in enumerate(self._search_text) if all(w in s for w in words)]

    def image(self, row: int, size: int | None = None) -> Image.Image:
        """Item `row` at `size` (world items render crisp at any size; files shrink to fit)."""
        return self.gallery.load_image(row, size)

    def vector(self, row: int) -> tuple[np.ndarray, float | None]:
        """Row `row`'s embedding (D,) and raw feature norm (None: not recorded)."""
        norm: float | None
        if self.store is not None:
            emb, norms = self.store.vectors(np.array([row], np.int64))
            emb, norm = np.asarray(emb[0], np.float32), float(norms[0])
        else:
            assert self.embeddings is not None, "without a store the view holds the embeddings"
            emb = self.embeddings[row]
            norm = None if self.feature_norms is None else float(self.feature_norms[row])
        return emb, (norm if norm is not None and np.isfinite(norm) else None)

    def thumbnail(self, row: int, size: int = 160) -> Image.Image:
        """A display thumbnail, LRU-cached (treat it as read-only: copy before drawing on it)."""
        return self._thumbs.get_or_make((int(row), int(size)), lambda: self.gallery.load_image(row, size))

    def reference_thumbnail(self, row: int, size: int = 160, mark: CharacterMark | None = None) -> Image.Image:
        """`thumbnail` with the reference's character marked (`mark`, else `self.mark(row)`)."""
        return draw_mark(self.thumbnail(row, size), mark or self.mark(row))

    # -- world queries ---------------------------------------------------------------------------
    def example_queries(self, n: int | None = None) -> list[Any]:
        """A handful of the benchmark's queries (the world's, the films'), one per kind of edit;
        a 2–3 sentence one first."""
        if self.queries is None:
            return []
        n = self.n_examples if n is None else n
        qs = self.queries.queries
        picked: list[Any] = []
        wanted: list[Callable[[Any], bool]] = [lambda q: q.edit_type == "long" and 2 <= len(q.sentences) <= 3]
        wanted += [_of_type(t) for t in ("two", "attribute", "spatial", "scene", "short")]
        wanted += [lambda q: q.edit_type == "long" and len(q.sentences) >= 4]
        for pred in wanted:
            hit = next((q for q in qs if pred(q) and q not in picked), None)
            if hit is not None:
                picked.append(hit)
        for q in qs:  # small benchmarks may lack a kind
            if len(picked) >= n:
                break
            if q not in picked:
                picked.append(q)
        return picked[:n]

    def query(self, query_id: str) -> tuple[Any, int]:
        """(query, reference row) for `query_id` (a world or film query)."""
        if self.queries is None:
            raise InputError("query ids need the world or film gallery (this gallery is "
                             f"{self.gallery.name!r})")
        qi = self._query_pos.get(str(query_id).strip())
        if qi is None:
            raise InputError(f"no query {str(query_id).strip()!r} in this benchmark "
                             f"({len(self.queries.queries)} queries, e.g. {self.queries.queries[0].query_id})")
        return self.queries.queries[qi], self.queries.reference_idx[qi]

    def ground_truth(self, reference: Reference, text: str) -> tuple[str | None, set[int]]:
        """(query id, target rows) when (reference, edit) is one of the benchmark's queries, else
        (None, set())."""
        qi = self._query_index(reference, text)
        if qi is None:
            return None, set()
        return self.queries.queries[qi].query_id, self._gt[qi]

    def query_character(self, reference: Reference, text: str) -> str | None:
        """The character a film query follows (its keyframes show several): the name the items'
        `character_ids` hold; None otherwise (a world reference shows one character)."""
        qi = self._query_index(reference, text)
        name = getattr(self.queries, "character_name", None)
        return None if qi is None or name is None else name(qi)

    def _query_index(self, reference: Reference, text: str) -> int | None:
        if self.queries is None or reference.row is None:
            return None
        return self._queries_by_key.get((reference.row, normalise_text(text)))

    # -- references ------------------------------------------------------------------------------
    def reference_from_row(self, row: int) -> Reference:
        row = int(row)
        if not 0 <= row < len(self.gallery):
            raise InputError(f"gallery row {row} is outside 0..{len(self.gallery) - 1}")
        item_id = self.item_id(row)
        emb, norm = self.vector(row)
        mark = self.mark(row)
        return Reference("gallery", item_id, emb, row=row, item_id=item_id,
                         character=(mark.name or mark.pid) if mark and mark.pid else self.character(row),
                         character_pid=mark.pid if mark else None, key=("row", row), norm=norm)

    def reference_from_id(self, item_id: str) -> Reference:
        return self.reference_from_row(self.row_of(item_id))

    def reference_from_upload(self, src: str | os.PathLike | bytes | Image.Image,
                              name: str | None = None) -> Reference:
        """Load (size-checked before decoding) and encode an uploaded image; the same file uploaded
        again is not re-encoded. Raises `ImageLoadError` with a message for the user."""
        key = None
        if isinstance(src, (str, os.PathLike)):
            try:
                st = os.stat(src)
                key = (os.path.abspath(src), st.st_size, st.st_mtime_ns)
            except OSError:
                key = None
            name = name or os.path.basename(os.fspath(src))
        seen = None if key is None else self._uploads.get(key)
        if seen is not None:
            return replace(seen, encode_ms=0.0)  # nothing encoded this time
        try:
            img = load_image(src, max_pixels=MAX_UPLOAD_PIXELS)
        except ImageLoadError as exc:  # name the file as the user knows it, not the server's temp path
            msg = str(exc)
            if isinstance(src, (str, os.PathLike)) and name:
                msg = msg.replace(repr(os.fspath(src)), repr(name))
            raise ImageLoadError(msg) from None
        t0, before = timing.now(), timing.charges()
        emb, norm = self.encoder.encode_images([img], with_norms=True)
        # its own encode: a wait for the shared encoder is the request's wait (cir_core.timing)
        ms = max(0.0, timing.now() - t0 - timing.charges().since(before).total_s) * 1000
        shown = img.copy()
        shown.thumbnail((512, 512))
        ref = Reference("upload", f"upload: {name or 'image'}", emb[0], image=shown, encode_ms=ms,
                        key=None if key is None else ("upload", *key), norm=float(norm[0]))
        if key is not None:
            self._uploads.put(key, ref)
        return ref


def _of_type(edit_type: str) -> Callable[[Any], bool]:
    """Whether a query's edit is of `edit_type`."""
    return lambda q: q.edit_type == edit_type
