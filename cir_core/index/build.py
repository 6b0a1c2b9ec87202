"""`python -m cir_core.index build`: embed a large gallery (an image folder, a manifest, a MovieNet
set or a generated world) once, in resumable shards (optionally across processes / GPUs with
torchrun), and save an index folder the app opens directly (`--gallery OUT`; the layout:
`prebuilt.py`), or insert it into a Milvus collection (`--backend milvus`, `milvus.py`; the app
opens `--gallery milvus:COLLECTION@URI`). docs/LARGE_GALLERIES.md.

    python -m cir_core.index build --gallery photos/ --backbone ViT-L-14 --pretrained openai --out idx/
    torchrun --nproc_per_node 4 -m cir_core.index build --gallery photos/ ... --out idx/
    python -m cir_core.index build --gallery photos/ ... --backend milvus --uri http://host:19530 --collection photos
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from cir_core import env

from ..encoder import TensorEncoder
from ..errors import CIRError, GalleryError, ImageLoadError, InputError
from ..fileio import atomic_write, atomic_write_path
from ..gallery import Gallery, safe_name
from ..gallery_spec import GalleryContext, open_gallery_spec, parse_gallery_spec
from ..search.index import EXACT_MAX, Index
from ..search.searcher import DEFAULT_SHORTLIST
from ..settings import milvus_token
from .milvus import INDEXES, MilvusIndex, MilvusTarget
from .prebuilt import BUILD_FILE, EMB_FILE, FORMAT, GALLERY_FILE, INDEX_FILE, NORMS_FILE, SKIPPED_FILE, read_meta
from .shards import Shard, embed_shards, gallery_rows, read_shard, shard_bounds, shard_path, write_shard

# Chosen with bench/bench_ann.py (docs/BENCHMARKS.md, "Approximate search"): on 2 cores IVF-Flat
# built 12x faster than HNSW at 100k with equal or better shortlist recall.
ANN, NPROBE = "ivf-flat", 32
HNSW_M, EF_CONSTRUCTION, EF_SEARCH = 32, 40, 256


FILE_KINDS = ("folder", "manifest")  # galleries of image files (what `push gallery` publishes)
SOURCE_KINDS = (*FILE_KINDS, "movienet", "world", "films")  # what the build embeds


def open_source(spec: str, kinds: tuple[str, ...] = SOURCE_KINDS, image_size: int = 64,
                world_queries: int = 1000) -> Gallery:
    """The gallery to embed, by its spec (`cir_core.gallery_spec`): an image folder, a JSONL/CSV
    manifest, a MovieNet set's frames or a generated world's gallery (rendered and fingerprinted
    at `image_size`, the backbone's), among `kinds`."""
    from ..benchmarks import movienet  # noqa: F401  (the openers of the kinds built from)
    from ..world import store  # noqa: F401
    from ..world.films import benchmark  # noqa: F401

    return open_gallery_spec(spec, GalleryContext(image_size, world_queries), kinds).gallery


def _fingerprint(gallery: Gallery, i: int) -> str:
    try:
        return gallery.fingerprint(i)
    except ImageLoadError:  # deleted since listing: its worker reports it and it is skipped
        return f"missing:{gallery.items[i].path}"


def _dist_init(device: str) -> tuple[int, int, str]:
    """(rank, world size, this rank's device); joins the torchrun group when there is one."""
    world = int(env.read("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1, device
    import torch.distributed as dist

    rank, local = int(env.read("RANK", "0")), int(env.read("LOCAL_RANK", "0"))
    if device.startswith("cuda"):
        device = f"cuda:{local}"
    if not dist.is_initialized():
        # Ranks wait for the slowest at the barrier: embedding a big slice takes hours, not 30 min.
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", timeout=timedelta(hours=48))
    return rank, world, device


def _barrier(device: str) -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier(device_ids=[int(device.split(":")[1])] if device.startswith("cuda:") else None)


def build(gallery: str, backbone: str | TensorEncoder, pretrained: str | None, out: str | os.PathLike, *,
          batch_size: int = 64, workers: int = 2, exact_max: int = EXACT_MAX, kind: str = "auto",
          device: str | None = None, shard_size: int = 4096, hnsw_m: int = HNSW_M,
          ef_construction: int = EF_CONSTRUCTION, ef_search: int = EF_SEARCH, ann: str = ANN,
          nlist: int | None = None, nprobe: int = NPROBE, progress: bool = True, world_queries: int = 1000,
          milvus: MilvusTarget | None = None,
          on_shard: Callable[[Shard], None] | None = None) -> dict[str, Any] | None:
    """Embed `gallery` with the backbone and write the index folder `out` (with `milvus`: insert
    the rows into that collection instead; `out` then holds the shards and skipped.jsonl only);
    returns its build record (None on ranks other than 0). Finished shards from an earlier,
    interrupted run are reused. `backbone`: what `load_backbone` takes, or an already loaded
    `Backbone` (its device wins)."""
    import torch

    from ..backbone import load_backbone

    if batch_size < 1 or workers < 0 or shard_size < 1 or exact_max < 0 or nprobe < 1 or (nlist or 1) < 1:
        raise InputError("batch size, shard size, nlist and nprobe must be >= 1, workers and exact-max >= 0")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    rank, world, device = _dist_init(device)
    try:
        bb = load_backbone(backbone, pretrained, device) if isinstance(backbone, str) else backbone
        device = bb.device
        src = open_source(gallery, image_size=bb.image_size, world_queries=world_queries)
        keys = [_fingerprint(src, i) for i in range(len(src))]
        params = {"kind": kind, "exact_max": exact_max, "ann": ann, "nlist": nlist, "nprobe": nprobe,
                  "hnsw_m": hnsw_m, "ef_construction": ef_construction, "ef_search": ef_search}
        if milvus is not None:  # the collection's own index; the folder's options do not apply
            params = {"backend": "milvus", "index": milvus.index.as_json()}
        digest = hashlib.sha1(json.dumps([bb.id, keys, params]).encode()).hexdigest()
        out = Path(out).expanduser()
        if milvus is not None and rank == 0:
            milvus.check(bb)  # a dead server or another backbone's collection: now, not after the embedding
        old = read_meta(out) if milvus is None else None
        if old is not None and old.get("digest") == digest and old.get("format") == FORMAT:
            if rank == 0:
                print(f"{out} is up to date ({old['n']} images, {old['kind']} index)", file=sys.stderr)
            return old if rank == 0 else None
        shard_dir = out / "shards"
        shard_dir.mkdir(parents=True, exist_ok=True)
        bounds = shard_bounds(len(src), shard_size)
        mine = [s for s in range(len(bounds)) if s % world == rank]
        todo = [s for s in mine if read_shard(shard_path(shard_dir, s), bb.id, keys[slice(*bounds[s])], bb.dim) is None]
        if progress and len(todo) < len(mine):
            print(f"[rank {rank}] {len(mine) - len(todo)} of {len(mine)} shards already embedded: skipped",
                  file=sys.stderr)
        by_start = {bounds[s][0]: s for s in todo}

        def done(shard: Shard) -> None:
            s = by_start[shard.start]
            write_shard(shard_path(shard_dir, s), shard, bb.id, keys[shard.start:shard.stop])
            if on_shard is not None:
                on_shard(shard)

        rows, processes = gallery_rows(src, bb)
        embed_shards(bb, rows, [bounds[s] for s in todo], batch_size, workers, done, progress=progress,
                     desc=f"embedding [rank {rank}/{world}]", processes=processes)
        _barrier(device)  # rank 0 merges only once every rank has written its shards
        if rank != 0:
            return None

        def load(s: int) -> Shard:
            a, b = bounds[s]
            sh = read_shard(shard_path(shard_dir, s), bb.id, keys[a:b], bb.dim)
            if sh is None:
                raise GalleryError(f"shard {s} (rows {a}-{b}) is missing or stale in {shard_dir}: did a rank fail?")
            return sh

        if milvus is not None:
            counts = _summary(out, src, load, len(bounds))
            record = {"source": str(gallery), "source_kind": parse_gallery_spec(str(gallery)).kind, "name": src.name,
                      "digest": digest, "image_size": int(bb.image_size), "world_queries": int(world_queries),
                      "skipped": len(src) - sum(counts)}
            written = milvus.write(src, keys, load, counts, bb, record, progress)
            return {**written, "kind": f"milvus {milvus.index.type}", "backbone": bb.id, "dim": int(bb.dim)}
        return _finish(out, src, keys, load, len(bounds), bb, gallery, params, digest, progress)
    finally:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


def _summary(out: Path, src: Gallery, load: Callable[[int], Shard], n_shards: int) -> list[int]:
    """Each shard's readable rows; the unreadable ones written to skipped.jsonl (as `_finish` does)."""
    counts, skipped = [], []
    for s in range(n_shards):
        sh = load(s)
        counts.append(len(sh.rows))
        skipped += sh.errors
    atomic_write(out / SKIPPED_FILE, lambda f: f.writelines(
        json.dumps({"id": src.items[r].id, "path": src.items[r].path, "error": m}) + "\n" for r, m in skipped), False)
    return counts


def _finish(out: Path, src: Gallery, keys: Sequence[str], load: Callable[[int], Shard], n_shards: int, bb: Any,
            spec: str, params: dict[str, Any], digest: str, progress: bool) -> dict[str, Any]:
    """Merge the shards into embeddings.npy, write gallery / skipped lists, the index, then build.json."""
    (out / BUILD_FILE).unlink(missing_ok=True)  # the commit point: absent while the folder changes
    # Two passes over the shard files, so that only one shard's vectors are in memory at a time
    # (a million ViT-L rows are 3 GB): rows and errors first, then the vectors into a memmap.
    rows, skipped = [], []
    for s in range(n_shards):
        sh = load(s)
        rows.append(sh.rows)
        skipped += sh.errors
    order = np.concatenate(rows)
    n = len(order)
    if n == 0:
        raise GalleryError(f"no image of {spec!r} could be read (see the messages above)")

    def merge(tmp: Path) -> None:
        emb = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, bb.dim))
        pos = 0
        for s in range(n_shards):
            sh = load(s)
            emb[pos:pos + len(sh.rows)] = sh.emb
            pos += len(sh.rows)
        emb.flush()

    atomic_write_path(out / EMB_FILE, merge)
    norms = np.concatenate([load(s).norms for s in range(n_shards)]).astype(np.float32)  # N floats: small
    atomic_write(out / NORMS_FILE, lambda f: np.save(f, norms), True)

    def item_row(i: int) -> dict[str, Any]:
        it = src.items[i]
        return {"id": it.id, "path": it.path, **it.meta, "fingerprint": keys[i]}

    atomic_write(out / GALLERY_FILE, lambda f: f.writelines(json.dumps(item_row(int(i))) + "\n" for i in order), False)
    atomic_write(out / SKIPPED_FILE, lambda f: f.writelines(
        json.dumps({"id": src.items[r].id, "path": src.items[r].path, "error": m}) + "\n" for r, m in skipped), False)
    t0 = time.monotonic()
    if progress:
        print(f"indexing {n} vectors ...", file=sys.stderr)
    index = Index.build(np.load(out / EMB_FILE, mmap_mode="r"), **params)
    atomic_write_path(out / INDEX_FILE, index.save)
    meta = {"format": FORMAT, "name": src.name, "source": str(spec), "backbone": bb.id, "dim": int(bb.dim),
            "n": n, "skipped": len(skipped), "kind": index.kind, **{k: v for k, v in params.items() if k != "kind"},
            "index_s": round(time.monotonic() - t0, 2), "digest": digest,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic_write(out / BUILD_FILE, lambda f: json.dump(meta, f, indent=1), False)
    return meta


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m cir_core.index", description="Build an index folder (or a Milvus "
                                 "collection) for a large gallery: the app opens it with --gallery OUT (or "
                                 "milvus:COLLECTION@URI), no re-encoding.")
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="embed a gallery and index it",
                       description="Embed an image folder, a JSONL/CSV manifest or a generated gallery in resumable "
                       "shards and index it: an index folder (--backend folder) or a Milvus collection (--backend "
                       "milvus). Run under `torchrun --nproc_per_node N` to split the shards over N processes/GPUs.")
    b.add_argument("--gallery", required=True, help="what to embed: an image folder, a JSONL/CSV manifest with a "
                   "'path' column, movienet:ROOT, or a generated gallery (world, world:val, world:films, "
                   "world:films-val)")
    b.add_argument("--world-queries", type=int, default=1000, help="a world gallery's size, in queries (as the "
                   "app's --world-queries)")
    b.add_argument("--backbone", required=True, help="open_clip name, local-dir:PATH or hf-hub:ORG/REPO")
    b.add_argument("--pretrained", default=None, help="open_clip tag or checkpoint file (default: none)")
    b.add_argument("--out", default=None, help="index folder (default: <gallery>.index next to the source; with "
                   "--backend milvus the shards' folder, <gallery>.milvus)")
    b.add_argument("--batch-size", type=int, default=64)
    b.add_argument("--workers", type=int, default=2, help="decoding worker processes per rank (0: in-process)")
    b.add_argument("--shard-size", type=int, default=4096, help="images per resumable shard")
    f = b.add_argument_group("the index folder (--backend folder)")
    f.add_argument("--exact-max", type=int, default=EXACT_MAX,
                   help="up to this many vectors the index is exact (flat); above, --ann")
    f.add_argument("--index", choices=("auto", "flat", "hnsw", "ivf-flat"), default="auto", dest="kind",
                   help="force an index kind (default: auto, by --exact-max)")
    f.add_argument("--ann", choices=("ivf-flat", "hnsw"), default=ANN, help=f"approximate index above --exact-max "
                   f"(default {ANN})")
    g = b.add_argument_group("both backends' index parameters")
    g.add_argument("--nlist", type=int, default=None, help="IVF lists (folder: power of 2 nearest 4 sqrt(N); "
                   "Milvus: 1024 per segment)")
    g.add_argument("--nprobe", type=int, default=NPROBE, help="IVF lists searched per query")
    g.add_argument("--hnsw-m", type=int, default=HNSW_M)
    g.add_argument("--ef-construction", type=int, default=EF_CONSTRUCTION)
    g.add_argument("--ef-search", type=int, default=EF_SEARCH)
    m = b.add_argument_group("a Milvus collection (--backend milvus; docs/LARGE_GALLERIES.md, Milvus)")
    m.add_argument("--backend", choices=("folder", "milvus"), default="folder",
                   help="where the vectors go: an index folder (default) or a Milvus collection")
    m.add_argument("--uri", help="Milvus: a Milvus Lite file (./g.db), http://host:19530 or https://... "
                   "(Zilliz Cloud); credentials in CIR_MILVUS_TOKEN")
    m.add_argument("--collection", help="Milvus: the collection's name (letters, digits, _)")
    m.add_argument("--milvus-index", choices=tuple(INDEXES), default="IVF_FLAT",
                   help="Milvus index type (default IVF_FLAT; Milvus Lite builds FLAT, IVF_FLAT, IVF_SQ8, HNSW)")
    m.add_argument("--search-list", type=int, default=100, help="DISKANN's search list (at least the shortlist)")
    m.add_argument("--shortlist", type=int, default=DEFAULT_SHORTLIST,
                   help=f"rows each query's Milvus shortlist holds, re-scored exactly (default {DEFAULT_SHORTLIST}; "
                   "a spec's ?shortlist= overrides)")
    m.add_argument("--milvus-shards", type=int, default=None, help="the collection's shards (Milvus's parallel "
                   "ingest channels; default: the server's)")
    m.add_argument("--replace", action="store_true", help="drop a collection embedded with another backbone")
    b.add_argument("--device", default=None, help="cpu, cuda (default: cuda when available)")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if args.backend == "milvus" and not (args.uri and args.collection):
        b.error("--backend milvus needs --uri and --collection")
    if args.backend == "folder" and (args.uri or args.collection):
        b.error("--uri and --collection are for --backend milvus")
    return args


def default_out(spec: str, backend: str) -> str:
    """Where the build writes when --out is not given: next to a folder or manifest source, else
    in the current folder under the spec's safe name."""
    suffix = ".index" if backend == "folder" else ".milvus"
    try:
        kind = parse_gallery_spec(spec).kind
    except GalleryError:
        kind = None
    if kind in FILE_KINDS:
        return str(Path(spec).expanduser().resolve()) + suffix
    return safe_name(spec) + suffix


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out or default_out(args.gallery, args.backend)
    try:
        target = None
        if args.backend == "milvus":
            index = MilvusIndex.from_flags(args.milvus_index, args.nlist, args.nprobe, args.hnsw_m,
                                           args.ef_construction, args.ef_search, args.search_list)
            target = MilvusTarget(args.uri, args.collection, index, token=milvus_token(), shortlist=args.shortlist,
                                  replace=args.replace, shards=args.milvus_shards)
        meta = build(args.gallery, args.backbone, args.pretrained, out, batch_size=args.batch_size,
                     workers=args.workers, exact_max=args.exact_max, kind=args.kind, device=args.device,
                     shard_size=args.shard_size, hnsw_m=args.hnsw_m, ef_construction=args.ef_construction,
                     ef_search=args.ef_search, ann=args.ann, nlist=args.nlist, nprobe=args.nprobe,
                     progress=not args.quiet, world_queries=args.world_queries, milvus=target)
    except CIRError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: finished shards are kept in {out}/shards; rerun the same command to resume",
              file=sys.stderr)
        return 130
    if meta is not None:
        where = {"out": out} if args.backend == "folder" else {"gallery": f"milvus:{args.collection}@{args.uri}",
                                                               "shards": out}
        print(json.dumps({k: meta[k] for k in ("n", "skipped", "kind", "backbone", "dim")} | where))
    return 0
