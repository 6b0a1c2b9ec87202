"""A generated benchmark split on disk, so a start does not regenerate it (~0.9 s of the app's).

The split is a pure function of the world's code and its parameters: the file name carries a hash
of both (`split_key`), so a change to the generator makes every older file a miss, never a stale
hit. `load_or_build` reads the first file that matches from the folders it is given (the user's
cache, then the shipped one: `python -m training.ship_gallery` writes it) and otherwise builds
the split and caches it. The format is plain JSON (gzip): scenes as lists, queries pointing at
their reference and target items; every scene is validated on the way in.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import logging
import zlib
from pathlib import Path
from typing import Any, Iterable

from ..fileio import atomic_write, loads_json
from ..gallery_spec import GalleryContext, GallerySpec, OpenedGallery, register_opener
from .benchmark import WorldBenchmark, WorldItem, build_benchmark
from .data import WorldQuery
from .language import Edit
from .spec import Character, Obj, Scene

log = logging.getLogger(__name__)
FORMAT = 1
SHOWCASE = 6  # demo queries (cir_core.world.data.showcase_queries) in the app's world gallery (test split)
# What a damaged or foreign file can raise on the way in: each means "not this file", never more.
_BAD_FILE = (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError, IndexError, AttributeError)
# What the split is made of (rendering is not: it changes pixels, which the fingerprints cover).
_SOURCES = ("spec.py", "language.py", "data.py", "benchmark.py")


def split_key(split: str, n_queries: int, showcase: int) -> str:
    """A hash of the generator's source and the parameters: equal keys, equal splits."""
    h = hashlib.sha1(f"{FORMAT}|{split}|{n_queries}|{showcase}".encode())
    for name in _SOURCES:
        h.update((Path(__file__).parent / name).read_bytes())
    return h.hexdigest()[:16]


def file_name(split: str, n_queries: int, showcase: int) -> str:
    return f"world-{split}-{n_queries}-{showcase}-{split_key(split, n_queries, showcase)}.json.gz"


def load_or_build(split: str, n_queries: int, showcase: int, folders: Iterable[Path],
                  cache: Path | None = None) -> WorldBenchmark:
    """The split from the first of `folders` holding its file, else built (and written to
    `cache` when given). An unreadable file is logged and skipped: the build is always right."""
    try:
        name = file_name(split, n_queries, showcase)
    except OSError as exc:  # the generator's source is not there to hash (a .pyc-only install)
        log.warning("cannot key the world split (%s); generating it, uncached", exc)
        return build_benchmark(split, n_queries, showcase=showcase)
    for folder in folders:
        path = Path(folder) / name
        if path.is_file():
            try:
                return read(path)
            except _BAD_FILE as exc:
                log.warning("ignoring %s (%s: %s); generating the split", path, type(exc).__name__, exc)
    bench = build_benchmark(split, n_queries, showcase=showcase)
    if cache is not None:
        try:
            write(bench, Path(cache) / name)
        except OSError as exc:  # a read-only cache costs the next start the build, nothing else
            log.warning("could not cache the world split in %s: %s", cache, exc)
    return bench


@register_opener("world")
def open_world(spec: GallerySpec, ctx: GalleryContext) -> OpenedGallery:
    """`world` / `world:val`: the split with `ctx.world_queries` queries, read from the cache's
    `world/` folder or the shipped assets when there (else generated, and written to the cache).
    The test split's demo queries put the README's edit, with a ground truth, on the first page."""
    from ..paths import SHIPPED_WORLD

    mine = None if ctx.cache is None else ctx.cache / "world"
    bench = load_or_build(spec.target, ctx.world_queries, SHOWCASE if spec.target == "test" else 0,
                          [f for f in (mine, SHIPPED_WORLD) if f is not None], cache=mine)
    return OpenedGallery(bench.gallery(ctx.image_size), bench)


# -- the JSON form ---------------------------------------------------------------------------------

def _obj(o: Obj) -> list:
    return [o.shape, o.colour, o.size, o.position]


def _scene(s: Scene) -> list:
    c = s.character
    return [s.background, c.identity, c.position, c.facing, [_obj(o) for o in s.objects]]


def _unscene(v: list) -> Scene:
    bg, ident, pos, facing, objs = v
    s = Scene(bg, Character(int(ident), pos, facing), tuple(Obj(*o) for o in objs))
    s.validate()
    return s


def _edit(e: Edit) -> list:
    return [e.op, e.target, {"obj": _obj(e.value)} if isinstance(e.value, Obj) else e.value]


def _unedit(v: list) -> Edit:
    op, target, value = v
    if not isinstance(value, dict):
        return Edit(op, target, value)
    o = Obj(*value["obj"])
    if not o.is_valid():
        raise ValueError(f"bad object in an edit: {o}")
    return Edit(op, target, o)


def to_json(b: WorldBenchmark) -> dict[str, Any]:
    """`b` as plain JSON types; queries name their reference and target by item index."""
    queries = [{"id": q.query_id, "ref_seed": q.ref_seed, "type": q.edit_type,
                "edits": [_edit(e) for e in q.edits], "sentences": list(q.sentences),
                "target_seed": q.target_seed, "target_caption": q.target_caption,
                "negatives": list(q.negatives), "ref_caption": q.ref_caption, "novel": q.novel}
               for q in b.queries]
    return {"format": FORMAT, "split": b.split, "queries": queries,
            "items": [[it.item_id, _scene(it.scene), it.seed] for it in b.items],
            "reference_idx": list(b.reference_idx), "target_idx": list(b.target_idx),
            "subsets": [list(s) for s in b.subsets]}  # copies: the dict never aliases `b`


def from_json(d: dict[str, Any]) -> WorldBenchmark:
    """The inverse of `to_json`; raises ValueError / KeyError on a record that does not fit."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ValueError(f"not a world split of format {FORMAT}")
    items = [WorldItem(str(i), _unscene(s), int(seed)) for i, s, seed in d["items"]]
    ref, tgt = [int(i) for i in d["reference_idx"]], [int(i) for i in d["target_idx"]]
    subsets = [[int(i) for i in s] for s in d["subsets"]]
    if not all(0 <= i < len(items) for i in ref + tgt + [i for s in subsets for i in s]):
        raise ValueError("an item index outside the gallery")
    queries = [WorldQuery(q["id"], items[r].scene, int(q["ref_seed"]), q["type"],
                          tuple(_unedit(e) for e in q["edits"]), tuple(q["sentences"]),
                          items[t].scene, int(q["target_seed"]), q["target_caption"],
                          tuple(q["negatives"]), q["ref_caption"], bool(q["novel"]))
               for q, r, t in zip(d["queries"], ref, tgt, strict=True)]
    return WorldBenchmark(d["split"], queries, items, ref, tgt, subsets)


def read(path: Path) -> WorldBenchmark:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return from_json(loads_json(f.read()))


def write(b: WorldBenchmark, path: Path) -> Path:
    """Atomically (`fileio.atomic_write`): a reader never sees half a file."""
    data = json.dumps(to_json(b), separators=(",", ":")).encode()

    def gz(raw: Any) -> None:
        # no name, mtime 0: the same split gives the same bytes, whatever the temp file is called
        with gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as f:
            f.write(data)

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, gz, True)
    return path
