"""The Annotate tab's pictures: each gallery item rendered once into a JPEG that Gradio's file
route serves (`ItemImages`, `IMAGES`), and the pair as two <img> (`pair_html`)."""
from __future__ import annotations

import hashlib
import html
import json
import logging
import os
import queue as _queue
import threading
import urllib.parse
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from cir_core.character_mark import draw_mark, mark_from
from cir_core.fileio import atomic_write

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from cir_core.engine import Engine

IMAGE = 384


class ItemImages:
    """Each gallery item the Annotate tab shows, rendered once at `size` into a JPEG file that
    Gradio's file route serves as it is (`pair_html`; the folder is one of Gradio's static
    paths). Files are keyed by the item's fingerprint (what determines its pixels), under
    `<cache dir>/annotate-images/` (`--cache-dir`, as the embeddings), so they outlive a restart:
    a campaign renders each picture once. `prefetch` renders the annotator's next pairs on a
    background thread while they judge this one, so a click neither renders nor encodes."""

    def __init__(self, size: int = IMAGE, max_memo: int = 100_000):
        self.size, self.max_memo = size, max_memo
        self._dir: Path | None = None
        # engine -> item id -> file (weak: a new engine that reuses an old one's id() starts empty)
        self._memo: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._queue: Any = None

    def known(self, engine: Engine, item_id: str) -> bool:  # plain pictures (candidates, prefetch)
        """Whether `item_id`'s file is already there (rendered in this process or before)."""
        with self._lock:
            return item_id in self._memo.get(engine, {})

    def configure(self, root: str | Path) -> None:
        """Where the pictures go (`<root>/annotate-images`); registered with Gradio as static."""
        folder = Path(root).expanduser() / "annotate-images"
        with self._lock:
            if self._dir != folder:
                self._dir = folder
                self._memo = weakref.WeakKeyDictionary()
        folder.mkdir(parents=True, exist_ok=True)
        gr.set_static_paths([folder])

    def _folder(self) -> Path:
        if self._dir is None:
            from cir_core.paths import cache_dir

            self.configure(cache_dir())
        assert self._dir is not None
        return self._dir

    def path(self, engine: Engine, item_id: str, character: dict | None = None) -> str | None:
        """The file showing `item_id` (None: not in this gallery); with `character` (a query's
        {"box", "name"}, on the frame's `resolution`) the character's box and name drawn on it —
        the reference only: a candidate is always shown plain."""
        item_id = str(item_id)
        memo_key = item_id if not character else f"{item_id}|{json.dumps(character, sort_keys=True)}"
        with self._lock:
            hit = self._memo.get(engine, {}).get(memo_key)
        if hit is not None:
            return hit
        folder = self._folder()
        try:
            row = engine.row(item_id)
            mark = mark_from(character, engine.gallery.items[row].meta.get("resolution"))
            digest = hashlib.sha1(f"{engine.gallery.fingerprint(row)}|{self.size}|{mark}".encode()).hexdigest()
        except Exception:  # an item no longer in this gallery: the status says so, nothing shown
            return None
        out = folder / digest[:2] / f"{digest}.jpg"
        if not out.is_file():
            try:
                img = draw_mark(engine.image(row, self.size).convert("RGB"), mark)
            except Exception:
                return None
            out.parent.mkdir(parents=True, exist_ok=True)
            # whole or not at all for a concurrent reader; a cache, so no fsync
            atomic_write(out, lambda f: img.save(f, format="JPEG", quality=92), binary=True, durable=False)
        with self._lock:
            memo = self._memo.setdefault(engine, {})
            if len(memo) > self.max_memo:
                memo.clear()
            memo[memo_key] = str(out)
        return str(out)

    def prefetch(self, engine: Engine, item_ids: Any) -> None:
        """Render these items ahead, on one background thread at the lowest CPU priority (the
        next pairs of the annotator on screen: `QueueState.upcoming`)."""
        todo = [i for i in item_ids if isinstance(i, str) and not self.known(engine, i)]
        if not todo:
            return
        with self._lock:
            if self._queue is None:
                self._queue = _queue.SimpleQueue()
                threading.Thread(target=self._prefetcher, name="cir-item-images", daemon=True).start()
        for i in todo:
            self._queue.put((engine, i))

    def _prefetcher(self) -> None:
        try:  # Linux: a thread is a task with its own nice value; never compete with a click
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except (AttributeError, OSError):
            pass
        while True:
            engine, item = self._queue.get()
            try:
                self.path(engine, item)
            except Exception as exc:  # a prefetch failure only costs speed
                log.info("could not render %r ahead: %s", item, exc)


IMAGES = ItemImages()


def pair_html(reference: str | None, candidate: str | None, candidate_b: str | None = None,
              prefix: str = "ann", answers: dict[str, str | None] | None = None) -> str:
    """The reference and the candidate side by side: two <img> of `ItemImages` files, which the
    browser fetches from Gradio's file route (the event's reply is this short string). With
    `candidate_b` (a pairwise pair): the reference on its own row, candidates A and B below.
    The answers chosen on screen ride along as data attributes (`data-<question>`): the page
    script marks those buttons aria-pressed (ui/annotate_help.py), so a screen reader hears which
    is selected. `prefix`: the tab's element ids (ann: Annotate, rev: Review)."""
    def fig(path: str | None, label: str, elem: str) -> str:
        if not path:
            img = f"<div class='ann-missing'>{label}: not in this gallery</div>"
        else:
            src = html.escape("gradio_api/file=" + urllib.parse.quote(path), quote=True)
            img = f"<img id='{elem}' src='{src}' alt='{label}'>"
        return f"<figure>{img}<figcaption>{label}</figcaption></figure>"

    chosen = "".join(f" data-{k}='{html.escape(v, quote=True)}'" for k, v in (answers or {}).items()
                     if isinstance(v, str))
    if candidate_b is None:
        return (f"<div class='ann-pair'{chosen}>{fig(reference, 'Reference', f'{prefix}-ref')}"
                f"{fig(candidate, 'Candidate', f'{prefix}-cand')}</div>")
    # Three pictures: the reference alone on the first row (half the width: the figures' own
    # max-width; the whole width on a phone, where the rows stack), A and B side by side below.
    return (f"<div class='ann-pair'{chosen}>{fig(reference, 'Reference', f'{prefix}-ref')}</div>"
            f"<div class='ann-pair'>{fig(candidate, 'A (left)', f'{prefix}-cand')}"
            f"{fig(candidate_b, 'B (right)', f'{prefix}-cand-b')}</div>")
