"""Build an identity set from MovieNet's release: `build_set(release, out, preset, ...)`.

What it picks (docs/MOVIENET.md, "Building a set"; every number is a flag):

- **References** (`ReferenceRules`): a labelled keyframe and one credited cast member on it (R1:
  not "others"; R2: boxed exactly once on that frame, so "the character" is one person) whose
  body box is large enough to judge (R3: height >= `min_height` of the frame and area >=
  `min_area`), not hidden behind another person (R4: IoU with every other box on the frame <=
  `max_overlap`), and shown again in the same film on a keyframe of another shot (R5: at least
  `min_positives`, so identity@k is reachable). References are spread round-robin over the
  reference films and, within a film, over its characters; no keyframe is used twice.
- **Gallery**: the reference films plus other films up to the preset's film count; the
  references, up to `positives` frames of each reference's character from other shots, one frame
  of every gallery film, and then frames drawn uniformly from all labelled keyframes of the
  gallery films (a keyframe nobody labelled has no automatic identity and is left out).
- **Queries**: `n_queries` spread evenly over the references; their edits come from a user's file
  (`read_edits`), e.g. the ITT generators' output for the `references.jsonl` manifest this
  builder writes (captions from the scene's place and action tags).

The set (this project's format, `cir_core.formats.movienet`, whose record functions write its
records) keeps every frame's cast ids and boxes; the keyframes are hard-linked (copied across
devices) under OUT with their release paths. (The format's `write` draws a `Split`'s pictures;
a set links its keyframes, writes atomically and has more files, so only the records are shared.)

Before anything is written, every keyframe the set uses is decoded whole and its size compared
with the `resolution` of each cast record on it (`check_keyframes`): a truncated or unreadable
file, or a resolution whose aspect ratio is not the image's (the boxes would land elsewhere), is
refused naming the file, the record and the key. (A truncated keyframe used to be hard-linked into
the set, and the failure came later, in the evaluation.) Boxes clipped to their frame within the
slack (release.py) are listed in build.json.
"""
from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from ...fileio import atomic_write
from ...formats import movienet as movienet_format
from ..common import BenchmarkError
from .edits import Edit, assign_edits, captions_for
from .release import BOX_SLACK, Person, ReleaseFilm, read_release

ASPECT_TOLERANCE = 0.02  # a keyframe's width/height may differ from its records' resolution by 2 %


@dataclass(frozen=True)
class Preset:
    """The shape of a set (PACT's Table 15)."""

    name: str
    n_queries: int
    n_references: int
    n_ref_films: int
    n_gallery: int
    n_gallery_films: int


PRESETS = {"identity-200": Preset("identity-200", 200, 200, 62, 6162, 66),
           "qualitative-1151": Preset("qualitative-1151", 1151, 90, 4, 100_000, 104)}


@dataclass(frozen=True)
class ReferenceRules:
    """R1–R5 above: which person on which keyframe may be a query's reference character."""

    min_height: float = 0.3
    min_area: float = 0.04
    max_overlap: float = 0.3
    min_positives: int = 1
    positives: int = 3  # gallery frames of each reference's character kept whatever the draw


@dataclass(frozen=True)
class Reference:
    film: str
    key: tuple[int, int]  # (shot, img)
    person: Person


def scaled(preset: Preset, **counts: int | None) -> Preset:
    """`preset` with the counts given (not None) replaced, checked for consistency."""
    given: dict[str, Any] = {k: v for k, v in counts.items() if v is not None}  # count fields only
    p = replace(preset, **given)
    for k, v in asdict(p).items():
        if k != "name" and v < 1:
            raise BenchmarkError(f"--{k.replace('_', '-')} must be >= 1, got {v}")
    if p.n_references > p.n_queries:
        raise BenchmarkError(f"{p.n_references} references need at least as many queries, not {p.n_queries}")
    if p.n_ref_films > p.n_references or p.n_ref_films > p.n_gallery_films:
        raise BenchmarkError(f"{p.n_ref_films} reference films need at least as many references "
                             f"({p.n_references}) and gallery films ({p.n_gallery_films})")
    if p.n_gallery < p.n_references:
        raise BenchmarkError(f"a gallery of {p.n_gallery} frames cannot hold {p.n_references} references")
    return p


def _iou(a: Sequence[float], b: Sequence[float]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def candidates(film: ReleaseFilm, rules: ReferenceRules) -> list[Reference]:
    """Every (keyframe, person) of `film` that rules R1–R5 allow as a reference."""
    shots_of: dict[str, set[int]] = {}
    for (shot, _), persons in film.persons.items():
        for p in persons:
            if p.credited:
                shots_of.setdefault(p.pid, set()).add(shot)
    out = []
    for key in sorted(film.persons):
        persons = film.persons[key]
        for p in persons:
            if (not p.credited or sum(q.pid == p.pid for q in persons) != 1
                    or p.height_fraction < rules.min_height or p.area_fraction < rules.min_area
                    or any(_iou(p.box, q.box) > rules.max_overlap for q in persons if q is not p)
                    or len(shots_of[p.pid] - {key[0]}) < rules.min_positives):
                continue
            out.append(Reference(film.imdb_id, key, p))
    return out


def pick_references(films: dict[str, ReleaseFilm], preset: Preset, rules: ReferenceRules,
                    rng: random.Random) -> list[Reference]:
    """`preset.n_references` references from `preset.n_ref_films` films (module docstring)."""
    pool = {fid: candidates(f, rules) for fid, f in films.items()}
    eligible = sorted(fid for fid, c in pool.items() if c)
    if len(eligible) < preset.n_ref_films:
        raise BenchmarkError(f"{preset.n_ref_films} reference films wanted, but only {len(eligible)} of the "
                             f"{len(films)} films have a keyframe the reference rules allow ({rules}); "
                             "scale with --n-ref-films or loosen the rules")
    rng.shuffle(eligible)
    chosen = eligible[:preset.n_ref_films]
    queues = []  # per film: per character, its candidates in random order
    for fid in chosen:
        by_char: dict[str, list[Reference]] = {}
        for r in pool[fid]:
            by_char.setdefault(r.person.pid, []).append(r)
        chars = sorted(by_char)
        rng.shuffle(chars)
        for c in chars:
            rng.shuffle(by_char[c])
        queues.append([by_char[c] for c in chars])
    picked: list[Reference] = []
    used: set[tuple[str, tuple[int, int]]] = set()
    turn = [0] * len(queues)
    while len(picked) < preset.n_references and any(any(q) for q in queues):
        for i, lanes in enumerate(queues):
            while any(lanes) and len(picked) < preset.n_references:
                lane = lanes[turn[i] % len(lanes)]
                turn[i] += 1
                if lane:
                    r = lane.pop()
                    if (r.film, r.key) not in used:
                        used.add((r.film, r.key))
                        picked.append(r)
                        break
    if len(picked) < preset.n_references:
        raise BenchmarkError(f"{preset.n_references} references wanted, but the {len(chosen)} reference films "
                             f"offer only {len(picked)} distinct keyframes the rules allow; scale with "
                             "--n-references or --n-ref-films")
    return picked


def pick_gallery(films: dict[str, ReleaseFilm], refs: list[Reference], preset: Preset,
                 rules: ReferenceRules, rng: random.Random) -> tuple[list[str], list[tuple[str, tuple[int, int]]]]:
    """(gallery films, gallery keyframes as (film, key)) as the module docstring says."""
    ref_films = list(dict.fromkeys(r.film for r in refs))
    others = sorted(fid for fid, f in films.items() if f.persons and fid not in ref_films)
    need = preset.n_gallery_films - len(ref_films)
    if need > len(others):
        raise BenchmarkError(f"{preset.n_gallery_films} gallery films wanted, but the release has only "
                             f"{len(ref_films) + len(others)} labelled films; scale with --n-gallery-films")
    rng.shuffle(others)
    gfilms = ref_films + others[:need]
    frames: dict[tuple[str, tuple[int, int]], None] = {(r.film, r.key): None for r in refs}
    for r in refs:
        film = films[r.film]
        pos = [k for k in sorted(film.persons) if k[0] != r.key[0] and r.person.pid in film.credited_on(k)]
        for k in rng.sample(pos, min(rules.positives, len(pos))):
            frames[(r.film, k)] = None
    for fid in gfilms:
        if not any(f == fid for f, _ in frames):
            frames[(fid, rng.choice(sorted(films[fid].persons)))] = None
    rest = [(fid, k) for fid in gfilms for k in sorted(films[fid].persons) if (fid, k) not in frames]
    total = len(frames) + len(rest)
    if preset.n_gallery > total:
        raise BenchmarkError(f"a gallery of {preset.n_gallery} frames wanted, but the {len(gfilms)} gallery films "
                             f"have only {total} labelled keyframes; scale with --n-gallery")
    if len(frames) > preset.n_gallery:
        raise BenchmarkError(f"the references and their positives already take {len(frames)} frames, more than "
                             f"--n-gallery {preset.n_gallery}; lower --positives or raise --n-gallery")
    for x in rng.sample(rest, preset.n_gallery - len(frames)):
        frames[x] = None
    return gfilms, sorted(frames)


def gallery_record(film: ReleaseFilm, key: tuple[int, int]) -> dict[str, Any]:
    persons = film.persons[key]
    return movienet_format.gallery_record(film.keyframes[key], film.imdb_id, film.credited_on(key),
                                          [(p.pid, p.box) for p in persons], persons[0].resolution)


def reference_record(film: ReleaseFilm, r: Reference) -> dict[str, Any]:
    actor, character = film.cast[r.person.pid]
    return {"reference_frame": film.keyframes[r.key], "film_id": film.imdb_id, "character_id": r.person.pid,
            "character_box": list(r.person.box), "character_name": character or actor, "actor": actor,
            "cast_record": r.person.record}


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:  # another device, or a filesystem without hard links
        shutil.copyfile(src, dst)


def _write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    atomic_write(path, lambda f: f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), binary=False)


def check_keyframes(release: Path, rel: dict[str, ReleaseFilm], frames: list[tuple[str, tuple[int, int]]],
                    progress: bool = False) -> None:
    """Every keyframe in `frames` decodes whole, and its aspect ratio is its cast records'
    `resolution`'s (MovieNet's keyframes may be smaller than the frame the boxes were drawn on,
    never of another shape); BenchmarkError naming the file, the record and the key otherwise."""
    from PIL import Image
    from tqdm import tqdm

    for fid, key in tqdm(frames, desc="checking keyframes", unit="frame", disable=not progress):
        path = release / rel[fid].keyframes[key]
        records = rel[fid].persons.get(key, [])
        named = "; ".join(p.source for p in records[:3]) or "no cast record"
        try:
            with Image.open(path) as im:
                im.load()
                size = im.size
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            raise BenchmarkError(f"{path}: the keyframe cannot be read whole ({exc}); it is named by {named}: "
                                 "restore the file from the release, or leave the film out (--films)") from None
        for p in records:
            want, got = p.resolution[0] / p.resolution[1], size[0] / size[1]
            if abs(got - want) / want > ASPECT_TOLERANCE:
                raise BenchmarkError(f"{p.source}: key 'resolution' {list(p.resolution)} does not fit the keyframe "
                                     f"{path} of {size[0]}x{size[1]} (aspect {want:.3f} vs {got:.3f}): its boxes "
                                     "would land elsewhere on the image")


def _check_out(out: Path) -> None:
    if out.exists() and any(out.iterdir()) and not (out / "build.json").is_file():
        raise BenchmarkError(f"{out}: not empty and not a set this builder wrote (no build.json); "
                             "give a new or empty folder")


def build_set(release: str | Path, out: str | Path, preset: Preset, *, films: Sequence[str] | None = None,
              seed: int = 0, rules: ReferenceRules = ReferenceRules(), edits: list[Edit] | None = None,
              progress: bool = False, box_slack: float = BOX_SLACK) -> dict[str, Any]:
    """Pick references and gallery from `release` and write the set under `out` (module docstring).

    Without `edits` it writes gallery.jsonl, references.jsonl (an ITT manifest) and build.json,
    and no queries.jsonl: the set needs its edits first. Returns the summary written to build.json.
    """
    release, out = Path(release).expanduser(), Path(out).expanduser()
    _check_out(out)
    rel = read_release(release, films, box_slack)
    rng = random.Random(f"movienet-build:{seed}")
    refs = pick_references(rel, preset, rules, rng)
    gfilms, frames = pick_gallery(rel, refs, preset, rules, rng)
    ref_rows = [reference_record(rel[r.film], r) for r in refs]
    queries = assign_edits(ref_rows, preset.n_queries, edits) if edits is not None else None
    check_keyframes(release, rel, frames, progress)  # before the first write: nothing partial
    out.mkdir(parents=True, exist_ok=True)
    from tqdm import tqdm

    for fid, key in tqdm(frames, desc="keyframes", unit="frame", disable=not progress):
        p = rel[fid].keyframes[key]
        _link(release / p, out / p)
    _write_jsonl(out / movienet_format.GALLERY, (gallery_record(rel[f], k) for f, k in frames))
    per_ref = -(-preset.n_queries // preset.n_references)
    _write_jsonl(out / "references.jsonl",
                 (row for r, ref in zip(refs, ref_rows) for row in captions_for(rel[r.film], r.key[0], ref, per_ref)))
    if queries is not None:
        _write_jsonl(out / movienet_format.QUERIES, queries)
    elif (out / movienet_format.QUERIES).exists():
        (out / movienet_format.QUERIES).unlink()  # a rebuild without edits must not keep stale queries
    summary = {"preset": asdict(preset), "seed": seed, "rules": asdict(rules), "release": str(release),
               "films_read": len(rel), "reference_films": len(dict.fromkeys(r.film for r in refs)),
               "gallery_films": len(gfilms), "gallery": len(frames), "references": len(refs),
               "characters": len({(r.film, r.person.pid) for r in refs}),
               "queries": len(queries) if queries is not None else 0, "box_slack": box_slack,
               "clipped_boxes": sum(len(f.clipped) for f in rel.values()),
               "clipped": [c for f in rel.values() for c in f.clipped][:50]}
    atomic_write(out / "build.json", lambda f: json.dump(summary, f, indent=1), binary=False)
    return summary
