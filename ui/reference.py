"""The Compare tab's reference handlers: the gallery browser (search and pages), uploads, the example
queries, and the reference a request starts from. Plain functions of the engine; `compare.build`
wires them."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from cir_core.errors import CIRError

from .common import fmt_ms, md_text

if TYPE_CHECKING:
    from cir_core.engine import Engine, Reference

PAGE_SIZE = 24
PICK_THUMB = 128
NO_REFERENCE = "Choose a reference first: click a gallery image, upload one, or pick an example query."


def page_view(engine: Engine, search: str, page: int) -> tuple[list, str, list[int], int]:
    """One page of the reference browser: (thumbnails, label, rows shown, page clamped)."""
    rows = engine.view.search(search or "")
    pages = max(1, math.ceil(len(rows) / PAGE_SIZE))
    page = min(max(int(page or 0), 0), pages - 1)
    shown = list(rows[page * PAGE_SIZE:(page + 1) * PAGE_SIZE])
    engine.view.prefetch(shown)  # a store's gallery: the page's items in one read
    items = [engine.view.thumbnail(r, PICK_THUMB) for r in shown]  # ids in the box once picked
    if rows:
        label = (f"{page * PAGE_SIZE + 1:,}–{page * PAGE_SIZE + len(shown):,} of {len(rows):,} images"
                 + (f" matching “{md_text(search.strip(), 100)}”" if (search or "").strip() else "")
                 + f" · page {page + 1}/{pages}")
    else:
        label = f"No image matches “{md_text((search or '').strip(), 100)}”. Search by id (test/000123), a character " \
                "name or caption words (blue star beach)."
    return items, label, shown, page


def reference_info(engine: Engine, ref: Reference) -> str:
    if ref.row is None:
        return (f"**{md_text(ref.label)}** · encoded in {fmt_ms(ref.encode_ms)}\n\n"
                "Character unknown (uploaded image): no identity or ground-truth marks.")
    who = f" · character **{md_text(ref.character)}**" if ref.character else ""
    cap = engine.view.caption(ref.row)
    return f"**{md_text(ref.item_id)}**{who}" + (f"\n\n<small>{md_text(cap, 1000)}</small>" if cap else "")


def reference_view(engine: Engine, ref_id: str) -> tuple[Any, str]:
    """(preview image, info markdown) for gallery item `ref_id`; raises InputError if unknown."""
    ref = engine.view.reference_from_id(ref_id)
    return engine.view.reference_thumbnail(ref.row, 256), reference_info(engine, ref)


def select_from_page(engine: Engine, rows: list[int], index: int) -> tuple[str, Any, str]:
    """A click on thumbnail `index` of the current page: (reference id, preview, info)."""
    if not rows or not 0 <= int(index) < len(rows) or not 0 <= int(rows[int(index)]) < len(engine.view.gallery):
        raise CIRError("That thumbnail is no longer on this page; pick again.")
    ref_id = engine.view.item_id(rows[int(index)])
    return (ref_id, *reference_view(engine, ref_id))


def upload_view(engine: Engine, path: str | None) -> tuple[Any, str]:
    """Validate and encode an upload now (so errors show at once): (preview, info)."""
    ref = engine.view.reference_from_upload(path)
    return ref.image, reference_info(engine, ref)


def example_items(engine: Engine) -> tuple[list, list[str]]:
    items, ids = [], []
    for q in engine.view.example_queries():
        _, row = engine.view.query(q.query_id)
        text = q.text if len(q.text) <= 70 else q.text[:68] + "…"
        items.append((engine.view.thumbnail(row, PICK_THUMB), f"{q.query_id} · {text}"))
        ids.append(q.query_id)
    return items, ids


def select_example(engine: Engine, ids: list[str], index: int) -> tuple[str, str, Any, str]:
    """(reference id, edit text, preview, info) of example query number `index`."""
    q, row = engine.view.query(ids[int(index)])
    ref_id = engine.view.item_id(row)
    return (ref_id, q.text, *reference_view(engine, ref_id))


def resolve_reference(engine: Engine, ref_id: str | None, upload: str | None) -> Any:
    """An upload wins (choosing a gallery image clears it); else the gallery id."""
    if upload:
        return engine.view.reference_from_upload(upload)
    if ref_id and str(ref_id).strip():
        return engine.view.reference_from_id(ref_id)
    raise CIRError(NO_REFERENCE)
