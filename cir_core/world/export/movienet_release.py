"""The film world in MovieNet's release layout (`python -m cir_core.world.export movienet-release`).
It stays here rather than in `cir_core.formats`: it is a source release the MovieNet set builder
consumes (read by `cir_core.benchmarks.movienet.release`), not a benchmark's layout.

Checked against the public MovieNet tooling, `movienet/movienet-tools` at d3f66b2
(`docs/wiki/data.md`, `docs/wiki/annotation.md`; keyframe names from
`movienet/tools/shotdetect/shotdetect/keyf_img_saver.py`):

    meta/<imdb_id>.json           {"imdb_id", "tmdb_id", "douban_id", "title", "genres", "country",
                                   "version": [{"runtime", "description"}], "imdb_rating",
                                   "director": [{"id", "name"}], "writer": [{"id", "name", "description"}],
                                   "cast": [{"id": "nm…", "name", "character"}], "overview"}
    annotation/<imdb_id>.json     {"imdb_id", "cast": [...], "scene": [...], "story": null,
                                   "cinematic_style": null}
    keyframes/<imdb_id>/shot_<4 digits>_img_<i>.jpg      three per shot, i = 0, 1, 2

A `cast` record is one person box on one keyframe: `{"id": "<imdb_id>_<6 digits>", "frame_idx":
null, "resolution": [w, h], "shot_idx", "img_idx", "body": {"type": "detected", "bbox": [x1, y1,
x2, y2]}, "pid": "nm…" or "others", "possible_pids": [pid]}` — the wiki's example box
[22, 27, 1148, 675] in a 1280×694 frame only fits as corners, not as x, y, w, h. MovieNet keeps
identities for the top-10 credited cast only, everyone else is "others": so does the world (its
films credit at most ten). `body.type` is "detected", the one value the public example shows,
although the world's boxes are exact. MovieNet labels identities on one keyframe of three; the
world knows all three and writes all three. A `scene` record: `{"id": "<imdb_id>_<4 digits>",
"shot": [first, last], "frame": [first, last], "place_tag": [the place], "action_tag": null}`;
frame numbers are made up at 24 fps from each shot's seed (the world has no video); the public
example shows only null tags, so the place as a one-tag list is this project's reading of "each
segment is annotated with multiple place tags". Beside the release, `world_queries.jsonl` holds
the split's CIR queries with their ground truth (not part of MovieNet) and `world_export.json`
the provenance.
"""
from __future__ import annotations

import random
from typing import Any

from cir_core.formats import Folder

from ..films.benchmark import FilmBenchmark
from ..films.film import Film
from ..films.spec import OTHER
from ..spec import NAMES

FPS = 24


def cast_pid(who: int, film: Film) -> str:
    """MovieNet's pid of a figure: the credited actor's person id, or "others"."""
    m = film.member(who) if who >= 0 else None
    return m.pid if m is not None else OTHER


def keyframe_path(film_id: str, shot: int, img: int) -> str:
    return f"keyframes/{film_id}/shot_{shot:04d}_img_{img}.jpg"


def shot_frames(film: Film) -> list[tuple[int, int]]:
    """(first, last) frame number of every shot: 2–8 s each at FPS, from the shot's seed."""
    out, t = [], 0
    for sh in film.story.shots:
        n = random.Random(f"frames:{sh.seed}").randint(2 * FPS, 8 * FPS)
        out.append((t, t + n - 1))
        t += n
    return out


def meta_record(film: Film) -> dict[str, Any]:
    runtime = shot_frames(film)[-1][1] // (FPS * 60) + 1
    return {"imdb_id": film.film_id, "tmdb_id": None, "douban_id": None,
            "title": f"{film.title} ({2000 + film.index % 25})", "genres": ["Drama"], "country": "World",
            "version": [{"runtime": f"{runtime} min", "description": ""}], "imdb_rating": None,
            "director": [], "writer": [],
            "cast": [{"id": c.pid, "name": c.actor, "character": c.character} for c in film.cast],
            "overview": f"A generated film of the CIR workbench's world ({film.split} split, film {film.index})."}


def annotation_record(film: Film, size: int) -> dict[str, Any]:
    from ..films.queries import keyframe

    cast, k = [], 0
    for sh in film.story.shots:
        for img in range(3):
            for who, box in keyframe(film, sh.index, img).boxes(size):
                k += 1
                pid = cast_pid(who, film)
                cast.append({"id": f"{film.film_id}_{k:06d}", "frame_idx": None, "resolution": [size, size],
                             "shot_idx": sh.index, "img_idx": img, "body": {"type": "detected", "bbox": list(box)},
                             "pid": pid, "possible_pids": [pid]})
    frames = shot_frames(film)
    scenes = [{"id": f"{film.film_id}_{s.index:04d}", "shot": [s.first, s.last],
               "frame": [frames[s.first][0], frames[s.last][1]], "place_tag": [s.place], "action_tag": None}
              for s in film.story.scenes]
    return {"imdb_id": film.film_id, "cast": cast, "scene": scenes, "story": None, "cinematic_style": None}


def export_movienet_release(bench: FilmBenchmark, out: Folder, split: str) -> dict[str, Any]:
    """Write `bench`'s films under `out` as MovieNet releases its data."""
    jobs = []
    n_cast = 0
    for film in bench.films:
        out.json(f"meta/{film.film_id}.json", meta_record(film))
        ann = annotation_record(film, out.size)
        n_cast += len(ann["cast"])
        out.json(f"annotation/{film.film_id}.json", ann)
    for it in bench.items:
        k = it.keyframe
        rel = keyframe_path(k.film_id, k.shot, k.img)
        out.items[rel] = it.item_id
        jobs.append((rel, (lambda k=k: k.image(out.size))))
    rows = []
    for q, _ref, gt in zip(bench.queries, bench.reference_idx, bench.gt_sets()):
        film, member = q.film, q.film.member(q.character)
        assert member is not None, "a query's character is in its film's cast"
        rows.append({"query_id": q.query_id, "imdb_id": film.film_id, "type": q.edit_type,
                     "reference": keyframe_path(film.film_id, q.reference.shot, q.reference.img),
                     "pid": member.pid, "actor": NAMES[q.character], "edit": q.text,
                     "sentences": list(q.sentences), "target_caption": q.target_caption,
                     "gt": sorted(keyframe_path(*_split_id(bench.items[r].item_id)) for r in gt)})
        out.queries[q.query_id] = q.query_id
    out.jsonl("world_queries.jsonl", rows)
    out.images(jobs, "movienet keyframes")
    return {"split_name": split, "films": len(bench.films), "keyframes": len(bench.items),
            "cast_records": n_cast, "queries": len(rows)}


def _split_id(item_id: str) -> tuple[str, int, int]:
    film_id, name = item_id.split("/")
    _, shot, _, img = name.split("_")
    return film_id, int(shot), int(img)


__all__ = ["FPS", "annotation_record", "cast_pid", "export_movienet_release", "keyframe_path", "meta_record",
           "shot_frames"]
