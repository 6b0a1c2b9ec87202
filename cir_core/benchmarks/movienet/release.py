"""MovieNet as released, read and checked: `read_release(root, films)`.

The layout (checked against movienet/movienet-tools d3f66b2: docs/wiki/data.md, annotation.md and
the keyframe saver, movienet/tools/shotdetect/shotdetect/keyf_img_saver.py)::

    meta/<imdb_id>.json          {"imdb_id", "cast": [{"id": "nm…", "name", "character"}, …], …}
    annotation/<imdb_id>.json    {"imdb_id", "cast": [person record, …], "scene": [scene record, …], …}
    keyframes/<imdb_id>/shot_<4+ digits>_img_<digit>.jpg     three per shot

A person record: {"id", "frame_idx", "resolution": [w, h], "shot_idx", "img_idx", "body":
{"type", "bbox": [x1, y1, x2, y2]}, "pid": a credited cast id or "others", "possible_pids"}.
The wiki's example box [22, 27, 1148, 675] in a 1280x694 frame only fits as corners, so the box
is read as corners. MovieNet labels identities on one keyframe of three and only for the top-10
credited cast; a keyframe with no person record is one nobody labelled (or nobody is in), so it
has no automatic identity and the builder leaves it out.

A scene record: {"id", "shot": [first, last], "frame": [first, last], "place_tag", "action_tag"}.
The public example shows only null tags; the wiki says a segment has "multiple place tags" and
sub-clips "multiple action tags", so a tag field may be null, one string, a list of strings, or
(actions) a list of such lists, which is flattened. Anything else is refused.

Every problem is a `BenchmarkError` naming the file, the record (its id or index) and the key;
nothing is half-read. A box may overhang its frame by at most `box_slack` of the frame's side
(detectors round outwards): it is clipped to the frame and the clip is reported
(`ReleaseFilm.clipped`, the builder's build.json); a box further outside is refused — it was
clipped silently before, so a box [100, 10, 400, 80] in a 160x90 frame became a different box.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..common import BenchmarkError, need, read_json

OTHERS = "others"
BOX_SLACK = 0.02  # how far (share of the frame's width / height) a box may overhang before it is refused
KEYFRAME = re.compile(r"shot_(\d{4,})_img_(\d+)\.jpg")
FILM_ID = re.compile(r"tt\d{7,8}")


@dataclass(frozen=True)
class Person:
    """One person box on one keyframe."""

    record: str  # the cast record's id
    pid: str  # a credited cast id, or "others"
    box: tuple[float, float, float, float]  # x1, y1, x2, y2 in `resolution`, clipped to the frame
    resolution: tuple[int, int]  # w, h the box is measured in
    source: str = field(default="", compare=False)  # "<annotation file> cast record #i (id '...')"

    @property
    def credited(self) -> bool:
        return self.pid != OTHERS

    @property
    def area_fraction(self) -> float:
        (x1, y1, x2, y2), (w, h) = self.box, self.resolution
        return (x2 - x1) * (y2 - y1) / float(w * h)

    @property
    def height_fraction(self) -> float:
        return (self.box[3] - self.box[1]) / float(self.resolution[1])


@dataclass(frozen=True)
class Scene:
    """A scene segment: shots first..last, with its place and action tags (possibly none)."""

    scene_id: str
    first: int
    last: int
    places: tuple[str, ...]
    actions: tuple[str, ...]


@dataclass
class ReleaseFilm:
    """One film of a release: credited cast, keyframes, person boxes per keyframe, scenes."""

    imdb_id: str
    title: str
    cast: dict[str, tuple[str, str]]  # pid -> (name, character); billing order
    keyframes: dict[tuple[int, int], str] = field(default_factory=dict)  # (shot, img) -> path under root
    persons: dict[tuple[int, int], list[Person]] = field(default_factory=dict)  # labelled keyframes only
    scenes: list[Scene] = field(default_factory=list)
    clipped: list[str] = field(default_factory=list)  # boxes clipped to the frame (within the slack), reported

    def scene_of(self, shot: int) -> Scene | None:
        """The scene holding `shot` (None: outside every annotated scene)."""
        return next((s for s in self.scenes if s.first <= shot <= s.last), None)

    def credited_on(self, key: tuple[int, int]) -> list[str]:
        """The credited cast ids boxed on keyframe `key` (each once, in record order)."""
        return list(dict.fromkeys(p.pid for p in self.persons.get(key, ()) if p.credited))


def keyframe_path(imdb_id: str, shot: int, img: int) -> str:
    """A keyframe's path under the release root, named as MovieNet's keyframe saver names it."""
    return f"keyframes/{imdb_id}/shot_{shot:04d}_img_{img}.jpg"


def release_films(root: Path) -> list[str]:
    """The films of a release: every annotation/<imdb_id>.json (sorted)."""
    folder = root / "annotation"
    if not folder.is_dir():
        raise BenchmarkError(f"{folder}: not found (a MovieNet release has meta/, annotation/ and keyframes/)")
    return sorted(p.stem for p in folder.glob("*.json"))


def read_release(root: str | Path, films: Sequence[str] | None = None,
                 box_slack: float = BOX_SLACK) -> dict[str, ReleaseFilm]:
    """The films `films` of the release under `root` (default: every annotated film), checked.
    `box_slack`: how far a body box may overhang its frame (share of the side) and be clipped."""
    root = Path(root).expanduser()
    ids = list(films) if films else release_films(root)
    if not ids:
        raise BenchmarkError(f"{root / 'annotation'}: no annotation/<imdb_id>.json files")
    bad = [f for f in ids if not FILM_ID.fullmatch(f)]
    if bad:
        raise BenchmarkError(f"not IMDb ids (tt + 7 or 8 digits): {', '.join(bad[:5])}")
    if not 0 <= box_slack < 1:
        raise BenchmarkError(f"--box-slack must be in [0, 1), got {box_slack}")
    return {fid: read_film(root, fid, box_slack) for fid in dict.fromkeys(ids)}


def read_film(root: Path, imdb_id: str, box_slack: float = BOX_SLACK) -> ReleaseFilm:
    film = _meta(root / "meta" / f"{imdb_id}.json", imdb_id)
    film.keyframes = _keyframes(root, imdb_id)
    path = root / "annotation" / f"{imdb_id}.json"
    ann = read_json(path)
    where = str(path)
    if need(ann, "imdb_id", str, where) != imdb_id:
        raise BenchmarkError(f"{path}: key 'imdb_id' is {ann['imdb_id']!r}, not the file's {imdb_id!r}")
    seen: set[str] = set()
    for i, rec in enumerate(need(ann, "cast", list, where)):
        p, key = _person(rec, f"{path} cast record #{i}", film, box_slack)
        if p.record in seen:
            raise BenchmarkError(f"{path} cast record #{i} (id {p.record!r}): key 'id' repeats an earlier record")
        seen.add(p.record)
        film.persons.setdefault(key, []).append(p)
    scenes = ann.get("scene")
    if scenes is not None and not isinstance(scenes, list):
        raise BenchmarkError(f"{path}: key 'scene' should be a list or null, got {type(scenes).__name__}")
    film.scenes = sorted((_scene(r, f"{path} scene record #{i}") for i, r in enumerate(scenes or [])),
                         key=lambda s: s.first)
    return film


def _meta(path: Path, imdb_id: str) -> ReleaseFilm:
    meta = read_json(path)
    where = str(path)
    if need(meta, "imdb_id", str, where) != imdb_id:
        raise BenchmarkError(f"{path}: key 'imdb_id' is {meta['imdb_id']!r}, not the file's {imdb_id!r}")
    cast: dict[str, tuple[str, str]] = {}
    for i, c in enumerate(need(meta, "cast", list, where)):
        w = f"{path} cast #{i}"
        pid = need(c, "id", str, w)
        if not pid or pid == OTHERS:
            raise BenchmarkError(f"{w}: key 'id' must be a person id (nm…), got {pid!r}")
        name, character = c.get("name"), c.get("character")
        for key, v in (("name", name), ("character", character)):
            if v is not None and not isinstance(v, str):
                raise BenchmarkError(f"{w}: key {key!r} should be str or null, got {type(v).__name__}")
        cast.setdefault(pid, (name or "", character or ""))  # IMDb lists some actors twice
    title = meta.get("title") if isinstance(meta.get("title"), str) else imdb_id
    return ReleaseFilm(imdb_id, title, cast)


def _keyframes(root: Path, imdb_id: str) -> dict[tuple[int, int], str]:
    folder = root / "keyframes" / imdb_id
    if not folder.is_dir():
        raise BenchmarkError(f"{folder}: not found (keyframes/<imdb_id>/shot_XXXX_img_Y.jpg)")
    out = {}
    for p in folder.iterdir():
        m = KEYFRAME.fullmatch(p.name)
        if m:
            out[(int(m[1]), int(m[2]))] = f"keyframes/{imdb_id}/{p.name}"
    if not out:
        raise BenchmarkError(f"{folder}: no keyframes named shot_XXXX_img_Y.jpg")
    return out


def _int(rec: dict, key: str, where: str, lo: int = 0) -> int:
    v = need(rec, key, int, where)
    if v < lo:
        raise BenchmarkError(f"{where}: key {key!r} must be >= {lo}, got {v}")
    return v


def _person(rec: Any, where: str, film: ReleaseFilm, box_slack: float = BOX_SLACK) -> tuple[Person, tuple[int, int]]:
    rid = need(rec, "id", str, where)
    where = f"{where} (id {rid!r})"
    key = (_int(rec, "shot_idx", where), _int(rec, "img_idx", where))
    if key not in film.keyframes:
        raise BenchmarkError(f"{where}: keys 'shot_idx', 'img_idx' = {key} name no keyframe "
                             f"({keyframe_path(film.imdb_id, *key)} is missing)")
    res = need(rec, "resolution", list, where)
    if len(res) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in res):
        raise BenchmarkError(f"{where}: key 'resolution' should be [width, height] in pixels, got {res!r}")
    body = need(rec, "body", dict, where)
    box = need(body, "bbox", list, f"{where} key 'body'")
    if len(box) != 4 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in box):
        raise BenchmarkError(f"{where}: key 'body.bbox' should be [x1, y1, x2, y2], got {box!r}")
    x1, y1, x2, y2 = (float(v) for v in box)
    if x2 <= x1 or y2 <= y1:
        raise BenchmarkError(f"{where}: key 'body.bbox' {box!r} is not [x1, y1, x2, y2] with x1 < x2, y1 < y2")
    w, h = res
    clipped = (max(x1, 0.0), max(y1, 0.0), min(x2, float(w)), min(y2, float(h)))
    if clipped[2] <= clipped[0] or clipped[3] <= clipped[1]:
        raise BenchmarkError(f"{where}: key 'body.bbox' {box!r} lies outside the {w}x{h} frame")
    over_x, over_y = max(0.0, -x1, x2 - w) / w, max(0.0, -y1, y2 - h) / h
    if max(over_x, over_y) > box_slack:
        raise BenchmarkError(
            f"{where}: key 'body.bbox' {box!r} reaches {max(over_x * w, over_y * h):g} px outside the {w}x{h} "
            f"frame of key 'resolution' ({max(over_x, over_y):.0%} of its side; at most {box_slack:.0%} is "
            "clipped): the box or the resolution is wrong")
    if clipped != (x1, y1, x2, y2):
        film.clipped.append(f"{where}: key 'body.bbox' {box!r} clipped to {[round(v, 2) for v in clipped]} "
                            f"in the {w}x{h} frame")
    pid = need(rec, "pid", str, where)
    if pid != OTHERS and pid not in film.cast:
        raise BenchmarkError(f"{where}: key 'pid' {pid!r} is neither 'others' nor in the cast of "
                             f"meta/{film.imdb_id}.json")
    return Person(rid, pid, clipped, (w, h), where), key


def _tags(rec: dict, key: str, where: str, nested: bool) -> tuple[str, ...]:
    v = rec.get(key)
    if v is None:
        return ()
    if isinstance(v, str):
        return (v,) if v.strip() else ()
    if isinstance(v, list):
        flat: list[Any] = [x for part in v for x in (part if nested and isinstance(part, list) else [part])]
        if all(isinstance(x, str) for x in flat):
            return tuple(dict.fromkeys(x.strip() for x in flat if x.strip()))
    raise BenchmarkError(f"{where}: key {key!r} should be null, a tag or a list of tags, got {v!r:.80}")


def _scene(rec: Any, where: str) -> Scene:
    sid = need(rec, "id", str, where)
    where = f"{where} (id {sid!r})"
    shots = need(rec, "shot", list, where)
    if len(shots) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in shots) \
            or shots[0] > shots[1]:
        raise BenchmarkError(f"{where}: key 'shot' should be [first, last] shot indices, got {shots!r}")
    return Scene(sid, shots[0], shots[1], _tags(rec, "place_tag", where, False),
                 _tags(rec, "action_tag", where, True))


def labelled_keyframes(films: Iterable[ReleaseFilm]) -> list[tuple[str, tuple[int, int]]]:
    """(imdb_id, (shot, img)) of every keyframe with at least one person record, in film order."""
    return [(f.imdb_id, key) for f in films for key in sorted(f.persons)]
