"""The Compare tab's reference handlers: the gallery browser (search and pages), uploads, the example
queries, and the reference a request starts from. Plain functions of the engine; `compare.build`
wires them."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cir_core.engine import NO_REFERENCE  # noqa: F401 (the engine's message; the tab imports it from here)
from cir_core.errors import CIRError

from .common import fmt_ms, md_text

if TYPE_CHECKING:
    from cir_core.engine import Engine, Reference

PAGE_SIZE = 24
PICK_THUMB = 128
NO_REFERENCE_INFO = "**No reference.** Click a gallery image, upload one, or pick an example query."
STALE = "⚠ **Stale:**"


@dataclass(frozen=True)
class Hints:
    """What the Compare tab's placeholders and notes say, for the kind of gallery it shows."""

    search: str
    edit: str
    examples: str


HINTS = {
    "world": Hints("Search id, character or caption (e.g. Ada beach)",
                   "Make the square blue. Move the character to the left.",
                   "Test queries of the generated world, with their edits: click one to load both. "
                   "In the results, its ground-truth target is framed in green."),
    "films": Hints("Search a keyframe id, a film id or an actor (e.g. Ada, tt9100003)",
                   "Make the character sit down. Turn the character to face left.",
                   "Test queries of the film world (MovieNet-shaped: a keyframe, what should change "
                   "about one actor): click one to load both. In the results, every keyframe that "
                   "answers it is framed in green."),
    "images": Hints("Search id, character or caption",
                    "Describe the change, e.g. Make it night. Add a red car.",
                    "This gallery has no example queries: they come with the generated world "
                    "(--gallery world) and the film world (--gallery world:films)."),
}


def hints(engine: Engine) -> Hints:
    return HINTS.get(engine.domain, HINTS["images"])


def reference_key(ref_id: str | None, upload: str | None) -> str:
    """What identifies the reference a request would use (an upload wins): 'id:test/000140',
    'upload:/tmp/…/photo.png', or '' for none."""
    if upload:
        return f"upload:{upload}"
    return f"id:{ref_id.strip()}" if ref_id and ref_id.strip() else ""


def _key_label(key: str) -> str:
    kind, _, value = key.partition(":")
    return md_text(value) if kind == "id" else f"the upload {md_text(os.path.basename(value))}" if value else "none"


def stale_status(now: str, shown: str, status: str) -> str | None:
    """The Compare status once the reference changed under results shown for another one (None:
    the results still belong to the reference): says so first, the results' own status after."""
    if not shown or now == shown:
        return None
    rest = status.split("\n\n", 1)[1] if status.startswith(STALE) and "\n\n" in status else status
    return (f"{STALE} the results below are for {_key_label(shown)}; the reference is now "
            f"{_key_label(now) if now else 'none'}. Press Compare to update them; their link and CSV are "
            f"withdrawn until then.\n\n{rest}")


def page_view(engine: Engine, search: str, page: int) -> tuple[list, str, list[int], int]:
    """One page of the reference browser: (thumbnails, label, rows shown, page clamped)."""
    rows = engine.search_gallery(search or "")
    pages = max(1, math.ceil(len(rows) / PAGE_SIZE))
    page = min(max(int(page or 0), 0), pages - 1)
    shown = list(rows[page * PAGE_SIZE:(page + 1) * PAGE_SIZE])
    engine.prefetch(shown)  # a store's gallery: the page's items in one read
    items = [engine.thumbnail(r, PICK_THUMB) for r in shown]  # ids in the box once picked
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
    many = ref.character and ", " in ref.character  # a film keyframe: its cast
    who = f" · {'cast' if many else 'character'} **{md_text(ref.character)}**" if ref.character else ""
    cap = engine.caption(ref.row)
    return f"**{md_text(ref.item_id)}**{who}" + (f"\n\n<small>{md_text(cap, 1000)}</small>" if cap else "")


def reference_view(engine: Engine, ref_id: str) -> tuple[Any, str]:
    """(preview image, info markdown) for gallery item `ref_id`; raises InputError if unknown."""
    ref = engine.reference(ref_id)
    return engine.reference_thumbnail(ref.row, 256), reference_info(engine, ref)


def select_from_page(engine: Engine, rows: list[int], index: int) -> tuple[str, Any, str]:
    """A click on thumbnail `index` of the current page: (reference id, preview, info)."""
    if not rows or not 0 <= int(index) < len(rows) or not 0 <= int(rows[int(index)]) < len(engine.gallery):
        raise CIRError("That thumbnail is no longer on this page; pick again.")
    ref_id = engine.item_id(rows[int(index)])
    return (ref_id, *reference_view(engine, ref_id))


def upload_view(engine: Engine, path: str | None) -> tuple[Any, str]:
    """Validate and encode an upload now (so errors show at once): (preview, info)."""
    ref = engine.reference(Path(path))
    return ref.image, reference_info(engine, ref)


def example_items(engine: Engine) -> tuple[list, list[str]]:
    """The example queries' thumbnails and captions ('test-00004 · Ada: Move the character…' on
    the films, whose keyframes show several actors), and their ids."""
    items, ids = [], []
    for q in engine.examples():
        _, row = engine.query(q.query_id)
        who = engine.query_character(engine.reference(int(row)), q.text)
        text = (f"{who}: " if who else "") + q.text
        text = text if len(text) <= 70 else text[:68] + "…"
        items.append((engine.thumbnail(row, PICK_THUMB), f"{q.query_id} · {text}"))
        ids.append(q.query_id)
    return items, ids


def select_example(engine: Engine, ids: list[str], index: int) -> tuple[str, str, Any, str]:
    """(reference id, edit text, preview, info) of example query number `index`."""
    q, row = engine.query(ids[int(index)])
    ref_id = engine.item_id(row)
    img, info = reference_view(engine, ref_id)
    who = engine.query_character(engine.reference(int(row)), q.text)
    if who:
        info += f"\n\nQuery **{md_text(q.query_id)}** is about **{md_text(who)}**."
    return ref_id, q.text, img, info


