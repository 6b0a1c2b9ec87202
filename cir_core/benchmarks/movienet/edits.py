"""A MovieNet set's edits: the captions the ITT generators start from, and the edits read back.

The builder writes `references.jsonl`, an image–caption manifest (`training.build_itt`'s input):
one row per (reference, variant) with `id` = the reference frame (plus `#v` for the v-th variant
when a reference needs more edits than the five edit types give), `path` and a `caption` built
from the reference's scene tags: "a film still of Jack Dawson in a deck, running". Any generator
(rules, an OpenAI-compatible endpoint, a local model) turns it into edits; the builder reads them
back with `read_edits`: a CSV or JSONL with `edit`, an optional `edit_type`, and the query it
belongs to, by `query_id`, or `reference_frame`, or ITT's `image_id` (the manifest's `id`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...fileio import read_table
from ...formats.movienet import query_record
from ...inputs import MAX_EDIT_CHARS, collapse_whitespace
from ..common import BenchmarkError
from .release import ReleaseFilm

N_EDIT_TYPES = 5  # training.itt's edit types: attribute, spatial, scene, two, short
VARIANTS = ("a film still of {who}", "a movie frame showing {who}", "a shot of {who}", "{who} on screen")


@dataclass(frozen=True)
class Edit:
    where: str  # "FILE line N"
    key: str  # a query id or a reference frame
    text: str
    edit_type: str | None


def captions_for(film: ReleaseFilm, shot: int, ref: dict[str, Any], queries: int) -> list[dict[str, Any]]:
    """The manifest rows of one reference: enough caption variants for `queries` edits."""
    scene = film.scene_of(shot)
    place = f" in a {scene.places[0]}" if scene and scene.places else ""
    action = f", {', '.join(scene.actions[:2])}" if scene and scene.actions else ""
    n = max(1, -(-queries // N_EDIT_TYPES))
    frame = ref["reference_frame"]
    return [{"id": frame if v == 0 else f"{frame}#{v}", "path": frame,
             "caption": VARIANTS[v % len(VARIANTS)].format(who=ref["character_name"]) + place + action,
             "film_id": ref["film_id"], "character_id": ref["character_id"]} for v in range(n)]


def read_edits(path: str | Path) -> list[Edit]:
    """Edits from a CSV or JSONL file; a bad row raises BenchmarkError naming file, line and key."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise BenchmarkError(f"{path}: edits file not found")
    rows, _ = read_table(path, BenchmarkError)
    out = []
    for n, row in rows:
        where = f"{path} line {n}"
        key = next((row[k] for k in ("query_id", "reference_frame", "image_id") if row.get(k) not in (None, "")), None)
        if not isinstance(key, (str, int)) or isinstance(key, bool):
            raise BenchmarkError(f"{where}: needs a 'query_id', 'reference_frame' or 'image_id' (string)")
        text = row.get("edit")
        if not isinstance(text, str) or not collapse_whitespace(text):
            raise BenchmarkError(f"{where}: key 'edit' should be a non-empty string, got {text!r:.60}")
        text = collapse_whitespace(text)
        if len(text) > MAX_EDIT_CHARS:
            raise BenchmarkError(f"{where}: key 'edit' is {len(text)} characters (at most {MAX_EDIT_CHARS})")
        kind = row.get("edit_type")
        if kind is not None and not isinstance(kind, str):
            raise BenchmarkError(f"{where}: key 'edit_type' should be a string")
        out.append(Edit(where, str(key).split("#")[0] if "image_id" in row else str(key), text, kind or None))
    if not out:
        raise BenchmarkError(f"{path}: no edits")
    return out


def query_ids(n_refs: int, n_queries: int) -> list[tuple[int, str]]:
    """(reference index, query id) of every query: `n_queries` spread evenly over the references."""
    base, extra = divmod(n_queries, n_refs)
    out: list[tuple[int, str]] = []
    for i in range(n_refs):
        out += [(i, f"{len(out) + j:05d}") for j in range(base + (i < extra))]
    return out


def assign_edits(refs: list[dict[str, Any]], n_queries: int, edits: list[Edit]) -> list[dict[str, Any]]:
    """The queries: each reference's share of `n_queries`, with edits taken in file order, by
    query id where the file names ids, else by reference frame. Refuses edits naming no query
    or reference, and a reference left short."""
    plan = query_ids(len(refs), n_queries)
    by_qid = {qid: i for i, qid in plan}
    frames = {r["reference_frame"]: i for i, r in enumerate(refs)}
    pinned: dict[str, Edit] = {}
    pools: dict[int, list[Edit]] = {}
    for e in edits:
        if e.key in by_qid:
            pinned.setdefault(e.key, e)
        elif e.key in frames:
            pools.setdefault(frames[e.key], []).append(e)
        else:
            raise BenchmarkError(f"{e.where}: {e.key!r} is neither a query id (00000–{len(plan) - 1:05d}) nor a "
                                 "reference frame of this set (references.jsonl)")
    out = []
    for i, qid in plan:
        pool = pools.get(i, [])
        given = pinned[qid] if qid in pinned else pool.pop(0) if pool else None
        if given is None:
            want = sum(1 for j, _ in plan if j == i)
            raise BenchmarkError(f"no edit left for query {qid} on reference {refs[i]['reference_frame']!r} "
                                 f"(it needs {want}); add rows for it to the edits file")
        r = refs[i]
        out.append(query_record(qid, r["reference_frame"], given.text, r["film_id"], r["character_id"],
                                character_box=r["character_box"], character_name=r["character_name"],
                                actor=r["actor"], edit_type=given.edit_type or None))
    return out
