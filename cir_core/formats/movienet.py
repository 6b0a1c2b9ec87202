"""MovieNet identity set (this project's format, for PACT's identity evaluation over MovieNet): the
layout, its evaluation reader (`read`; `read_set` for the annotation pooling) and the writers.

Layout under ROOT (frame paths are relative to ROOT)::

    gallery.jsonl   one {"frame": "keyframes/tt0120338/shot_0012_img_1.jpg", "film_id": "tt0120338",
                         "character_ids": ["nm0000138", ...],
                         "cast": [{"pid": "nm0000138", "bbox": [x1, y1, x2, y2]}, {"pid": "others", ...}],
                         "resolution": [w, h]} per gallery frame ("cast" and "resolution" optional)
    queries.jsonl   one {"query_id", "reference_frame", "edit", "film_id", "character_id",
                         "character_box": [x1, y1, x2, y2], "character_name": "Jack Dawson",
                         "actor": "Leonardo DiCaprio"} per query (the last three optional; "edit_type" too)

`reference_frame` must be one of the gallery's frames; `character_id` may be null or "" when
unknown (that query is ranked but not scored). A `character_box` must be one of that character's
boxes on the reference frame when the frame has boxes; without it, the frame's only box of that
character is used. Boxes are corners in the frame's `resolution` (MovieNet's annotation
convention). The set has one split, `val`.

Two writers, one record shape (`gallery_record`, `query_record`): the set builder
(`python -m cir_core.benchmarks.movienet build`, docs/MOVIENET.md) writes its records from
MovieNet's release, linking the keyframes; `write` lays out a `Split` whose pictures are drawn
(the generated world: `python -m cir_core.world.export movienet`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import FormatError, check_files, need, read_jsonl_lines
from .registry import Format, register_format
from .writing import Folder, Split

GALLERY, QUERIES = "gallery.jsonl", "queries.jsonl"
SPLITS = ("val",)


@dataclass(frozen=True)
class Cast:
    """One person box on a frame: a credited cast id (or "others") and its corners."""

    pid: str
    bbox: list[float]


@dataclass(frozen=True)
class Frame:
    """One gallery record."""

    frame: str  # the path relative to ROOT (the frame's id)
    path: str  # ROOT / frame
    film_id: str
    character_ids: list[str]
    cast: list[Cast] | None = None  # given with `resolution`, or neither
    resolution: list[int] | None = None  # [w, h] the boxes are measured in


@dataclass(frozen=True)
class IdentityQuery:
    """One query record; `character_box` is the given box, else the reference's only box of the
    character, else None."""

    query_id: str
    reference_frame: str
    edit: str
    film_id: str
    character_id: str | None  # None: unknown (ranked, not scored)
    character_box: list[float] | None = None
    character_name: str | None = None
    actor: str | None = None
    edit_type: str | None = None


def box(v: Any, where: str, key: str) -> list[float]:
    """`v` as corners [x1, y1, x2, y2] with x1 < x2 and y1 < y2, or FormatError naming `where` and `key`."""
    if not isinstance(v, list) or len(v) != 4 or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                         for x in v) or v[2] <= v[0] or v[3] <= v[1]:
        raise FormatError(f"{where}: key {key!r} should be [x1, y1, x2, y2] with x1 < x2, y1 < y2, got {v!r:.80}")
    return [float(x) for x in v]


def check_frame(r: dict, root: Path, where: str) -> Frame:
    """A gallery record, every key checked."""
    frame = need(r, "frame", str, where)
    chars = need(r, "character_ids", list, where)
    if not all(isinstance(c, str) and c for c in chars):
        raise FormatError(f"{where}: character_ids should be a list of non-empty strings")
    film = need(r, "film_id", str, where)
    if "cast" not in r:
        return Frame(frame, str(root / frame), film, chars)
    cast = [Cast(need(c, "pid", str, f"{where} cast #{i}"),
                 box(c.get("bbox") if isinstance(c, dict) else None, f"{where} cast #{i}", "bbox"))
            for i, c in enumerate(need(r, "cast", list, where))]
    res = need(r, "resolution", list, where)
    if len(res) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in res):
        raise FormatError(f"{where}: key 'resolution' should be [width, height], got {res!r:.80}")
    return Frame(frame, str(root / frame), film, chars, cast, res)


def check_query(r: dict, frames: dict[str, Frame], where: str, gallery_name: str) -> IdentityQuery:
    """A query record, every key checked against the gallery `frames` (by frame path)."""
    qid = str(need(r, "query_id", (str, int), where))
    ref = need(r, "reference_frame", str, where)
    if ref not in frames:
        raise FormatError(f"{where}: reference_frame {ref!r} is not a frame of {gallery_name}")
    edit = need(r, "edit", str, where)
    if not edit.strip():
        raise FormatError(f"{where}: 'edit' is empty")
    char = r.get("character_id")
    if char is not None and not isinstance(char, str):
        raise FormatError(f"{where}: character_id should be a string or null")
    film = need(r, "film_id", str, where)
    more = {key: need(r, key, str, where) for key in ("character_name", "actor", "edit_type") if r.get(key) is not None}
    cast = frames[ref].cast
    boxes = [c.bbox for c in cast or () if char and c.pid == char]
    given = None
    if r.get("character_box") is not None:
        if not char:
            raise FormatError(f"{where}: 'character_box' needs a 'character_id'")
        given = box(r["character_box"], where, "character_box")
        if cast is not None and given not in boxes:
            raise FormatError(f"{where}: 'character_box' {given} is not a box of {char!r} on {ref!r} "
                              f"(its boxes there: {boxes or 'none'})")
    elif len(boxes) == 1:
        given = boxes[0]
    return IdentityQuery(qid, ref, edit, film, char or None, given, **more)


def read_set(root: Path) -> tuple[list[Frame], list[IdentityQuery]]:
    """(gallery frames, queries) of the set under `root`, every record checked and every frame's
    file there; FormatError naming the file, the line and the key otherwise."""
    gpath, qpath = root / GALLERY, root / QUERIES
    frames: dict[str, Frame] = {}
    for n, r in read_jsonl_lines(gpath):
        f = check_frame(r, root, f"{gpath} line {n}")
        if f.frame in frames:
            raise FormatError(f"{gpath} line {n}: duplicate frame {f.frame!r}")
        frames[f.frame] = f
    if not frames:
        raise FormatError(f"{gpath}: no gallery frames")
    check_files((f.path for f in frames.values()), str(gpath))
    queries, seen = [], set()
    for n, r in read_jsonl_lines(qpath):
        q = check_query(r, frames, f"{qpath} line {n}", gpath.name)
        if q.query_id in seen:
            raise FormatError(f"{qpath} line {n}: duplicate query_id {q.query_id!r}")
        seen.add(q.query_id)
        queries.append(q)
    if not queries:
        raise FormatError(f"{qpath}: no queries")
    return list(frames.values()), queries


def read(root: Path, split: str = "val") -> tuple[list[Frame], list[IdentityQuery]]:
    """The evaluation reader: `read_set(root)`; the set has one split."""
    if split not in SPLITS:
        raise FormatError(f"the MovieNet identity set has one split; use --split val, not {split!r}")
    return read_set(root)


def gallery_record(frame: str, film_id: str, character_ids: Sequence[str],
                   cast: Sequence[tuple[str, Sequence[float]]] | None = None,
                   resolution: Sequence[int] | None = None) -> dict[str, Any]:
    """A gallery.jsonl record; `cast` as (pid, corners) pairs, given with `resolution`."""
    row: dict[str, Any] = {"frame": frame, "film_id": film_id, "character_ids": list(character_ids)}
    if cast is not None:
        if resolution is None:
            raise ValueError(f"{frame}: a frame's cast boxes need its resolution")
        row["cast"] = [{"pid": pid, "bbox": list(b)} for pid, b in cast]
        row["resolution"] = list(resolution)
    return row


def query_record(query_id: str, reference_frame: str, edit: str, film_id: str, character_id: str | None, *,
                 character_box: Sequence[float] | None = None, character_name: str | None = None,
                 actor: str | None = None, edit_type: str | None = None) -> dict[str, Any]:
    """A queries.jsonl record; the optional keys are written when given."""
    row: dict[str, Any] = {"query_id": query_id, "reference_frame": reference_frame, "edit": edit,
                           "film_id": film_id, "character_id": character_id}
    if character_box is not None:
        row["character_box"] = list(character_box)
    row.update((k, v) for k, v in (("character_name", character_name), ("actor", actor), ("edit_type", edit_type))
               if v is not None)
    return row


def frame_file(film: str, j: int) -> str:
    """The written name of picture `j` of a split: a keyframe of its film."""
    return f"frames/{film}/shot_{j:06d}_img_0.jpg"


def write(split: Split, out: Folder) -> dict[str, Any]:
    """The split's pictures as frames of their films (`Picture.film`), each showing its
    `characters`; each query follows its `character` ("" unknown: written as null) and is in its
    reference's film. Every picture needs a film."""
    if any(not p.film for p in split.pictures):
        raise ValueError("the MovieNet writer needs every picture's film (Picture.film)")
    frames = [frame_file(p.film, j) for j, p in enumerate(split.pictures)]
    out.items.update({f: p.source for f, p in zip(frames, split.pictures)})
    out.jsonl(GALLERY, (gallery_record(f, p.film, p.characters) for f, p in zip(frames, split.pictures)))
    rows = []
    for q in split.queries:
        rows.append(query_record(q.source, frames[q.reference], q.text, split.pictures[q.reference].film,
                                 q.character or None))
        out.queries[q.source] = q.source
    out.jsonl(QUERIES, rows)
    out.images([(f, p.draw) for f, p in zip(frames, split.pictures)], "movienet")
    return {"split_name": split.name, "queries": len(rows), "gallery": len(frames)}


register_format(Format("movienet", "MovieNet identity set: keyframes with their characters, queries that follow one",
                       benchmark="movienet", read=read, write=write, order=60))
