"""A small MovieNet release written by hand in the official schema (movienet-tools d3f66b2,
docs/MOVIENET.md): `write_film` for one film, `write_release` for the builder tests' three films."""
from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

RES = [320, 180]
BIG = [10, 10, 110, 170]
FILM = "tt0000001"


def person(film: str, n: int, shot: int, img: int, pid: str, box: list) -> dict:
    return {"id": f"{film}_{n:06d}", "frame_idx": None, "resolution": RES, "shot_idx": shot, "img_idx": img,
            "body": {"type": "detected", "bbox": box}, "pid": pid, "possible_pids": [pid]}


def write_film(root: Path, film: str, cast: list[tuple[str, str, str]], boxes: list[tuple], shots: int = 6,
               size: tuple[int, int] = (32, 18)) -> None:
    """One film as MovieNet releases it: meta, annotation (cast + scene records), keyframes."""
    (root / "meta").mkdir(parents=True, exist_ok=True)
    (root / "annotation").mkdir(exist_ok=True)
    (root / "meta" / f"{film}.json").write_text(json.dumps({
        "imdb_id": film, "title": film, "cast": [{"id": p, "name": a, "character": c} for p, a, c in cast]}))
    ann = {"imdb_id": film, "cast": [person(film, i, *b) for i, b in enumerate(boxes, 1)],
           "scene": [{"id": f"{film}_0000", "shot": [0, 2], "frame": [0, 100], "place_tag": "deck",
                      "action_tag": [["run"], ["hug"]]},
                     {"id": f"{film}_0001", "shot": [3, shots - 1], "frame": [101, 200], "place_tag": None,
                      "action_tag": None}],
           "story": None, "cinematic_style": None}
    (root / "annotation" / f"{film}.json").write_text(json.dumps(ann))
    kf = root / "keyframes" / film
    kf.mkdir(parents=True, exist_ok=True)
    for s in range(shots):
        for i in range(3):  # blue-grey frames: nothing amber, so a drawn box is the only amber
            Image.new("RGB", size, (s * 40 % 255, i * 80, 90)).save(kf / f"shot_{s:04d}_img_{i}.jpg")


def write_release(root: Path, size: tuple[int, int] = (32, 18)) -> Path:
    """Film tt0000001 holds exactly two allowed references (Jack on shot 0, Rose on shot 5) and
    one case of each reference rule refused; two more films are distractors with none."""
    cast = [("nm0000001", "Leo", "Jack"), ("nm0000002", "Kate", "Rose"), ("nm0000003", "Billy", "Cal")]
    write_film(root, FILM, cast, [
        (0, 0, "nm0000001", BIG),                                           # a reference
        (1, 0, "nm0000002", [0, 0, 20, 30]),                                 # R3: too small
        (2, 0, "nm0000001", BIG), (2, 0, "nm0000002", [20, 10, 120, 170]),  # R4: overlapping
        (3, 0, "others", BIG),                                              # R1: not credited
        (4, 0, "nm0000003", BIG),                                           # R5: Cal's only shot
        (5, 0, "nm0000001", BIG), (5, 0, "nm0000001", [200, 10, 300, 170]),  # R2: Jack twice
        (5, 1, "nm0000002", [150, 0, 250, 180]),                            # a reference
    ], size=size)
    for k, film in enumerate(("tt0000002", "tt0000003")):
        write_film(root, film, [(f"nm000010{k}", "Ann", "Mary")],
                   [(s, 1, f"nm000010{k}", [0, 0, 20, 30]) for s in range(4)] + [(4, 1, "others", BIG)],
                   shots=5, size=size)  # no reference there: every credited box is too small
    return root


def write_small_set(root: Path, size: tuple[int, int], n_gallery: int, edit: str) -> Path:
    """`write_release`'s two references built into a set (identity-200 shape, scaled) under
    root/set, every query with `edit`: the builder's two passes, as a user runs them."""
    from cir_core.benchmarks.movienet.build import PRESETS, build_set, scaled
    from cir_core.benchmarks.movienet.edits import read_edits

    rel = write_release(root / "release", size=size)
    preset = scaled(PRESETS["identity-200"], n_queries=2, n_references=2, n_ref_films=1, n_gallery=n_gallery,
                    n_gallery_films=3)
    build_set(rel, root / "set", preset)
    refs = [json.loads(x) for x in (root / "set" / "references.jsonl").read_text().splitlines()]
    (root / "edits.jsonl").write_text("".join(json.dumps({"reference_frame": r["id"], "edit": edit}) + "\n"
                                              for r in refs))
    build_set(rel, root / "set", preset, edits=read_edits(root / "edits.jsonl"))
    return root / "set"
