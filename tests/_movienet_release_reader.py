"""A small reader of MovieNet's release layout (meta/, annotation/, keyframes/), for the export's
round-trip test only: the real builder (a later issue) reads the same files. It checks what a
builder relies on and says which file and record break it."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

KEYFRAME = re.compile(r"shot_(\d{4})_img_(\d)\.jpg")


@dataclass
class ReleaseFilm:
    imdb_id: str
    cast: dict[str, tuple[str, str]]  # pid -> (name, character)
    keyframes: dict[tuple[int, int], Path] = field(default_factory=dict)  # (shot, img) -> file
    boxes: dict[tuple[int, int], list[tuple[str, tuple[int, ...]]]] = field(default_factory=dict)
    scenes: list[dict] = field(default_factory=list)


def read_release(root: Path) -> dict[str, ReleaseFilm]:
    films: dict[str, ReleaseFilm] = {}
    for meta_path in sorted((root / "meta").glob("*.json")):
        meta = json.loads(meta_path.read_text())
        fid = meta["imdb_id"]
        assert meta_path.stem == fid, f"{meta_path}: imdb_id {fid}"
        film = ReleaseFilm(fid, {c["id"]: (c["name"], c["character"]) for c in meta["cast"]})
        for p in sorted((root / "keyframes" / fid).iterdir()):
            m = KEYFRAME.fullmatch(p.name)
            assert m, f"{p}: not a MovieNet keyframe name"
            film.keyframes[(int(m[1]), int(m[2]))] = p
        ann = json.loads((root / "annotation" / f"{fid}.json").read_text())
        assert ann["imdb_id"] == fid
        for rec in ann["cast"]:
            where = f"annotation/{fid}.json cast {rec['id']}"
            key = (rec["shot_idx"], rec["img_idx"])
            assert key in film.keyframes, f"{where}: no keyframe {key}"
            w, h = rec["resolution"]
            x1, y1, x2, y2 = rec["body"]["bbox"]
            assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h, f"{where}: bbox outside the frame"
            assert rec["pid"] == "others" or rec["pid"] in film.cast, f"{where}: pid {rec['pid']} not credited"
            assert rec["possible_pids"] == [rec["pid"]]
            film.boxes.setdefault(key, []).append((rec["pid"], (x1, y1, x2, y2)))
        film.scenes = ann["scene"]
        films[fid] = film
    return films
