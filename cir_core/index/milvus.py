"""A gallery in a Milvus collection: `python -m cir_core.index build --backend milvus` writes it
from the build's shards (`MilvusTarget`), `--gallery milvus:COLLECTION@URI` opens it
(`open_milvus`): the vectors stay in Milvus, which answers each query's cosine shortlist with the
rows' vectors; Chord and cosine are re-scored exactly on it by `cir_core.search.rank`, and items
are read by row when a request needs them. The URI is a Milvus Lite file (`./g.db`, in-process),
a Milvus server (`http://host:19530`, standalone or distributed) or Zilliz Cloud (`https://...`,
with `CIR_MILVUS_TOKEN`); docs/LARGE_GALLERIES.md, "Milvus".

The collection (format 1): `row` INT64 primary key (the gallery row, 0..n-1 in the build's
order), `vector` FLOAT_VECTOR (L2-normalised, COSINE), `norm` FLOAT (the raw feature norm before
normalisation), `item_id`, `path` (an absolute image file, "" for generated items), `fingerprint`,
`search` (lower-cased id, caption and character: the app's gallery search) and `meta` (JSON: the
gallery's own columns). Collection properties `cir.*` record the backbone, the source, the index,
the build's digest and its progress (`cir.state`: "inserting" until the last shard is in and the
index is built, then "complete"), so a build resumes and an app refuses another backbone's rows.
"""
from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..encoder import Encoder
from ..errors import GalleryError, InputError
from ..gallery import Gallery, GalleryItem, RemoteGallery
from ..gallery_spec import GalleryContext, GallerySpec, OpenedGallery, open_gallery_spec, open_images, register_opener
from ..search.searcher import DEFAULT_SHORTLIST
from .shards import Shard

FORMAT = "1"
MAX_TOPK = 16_384  # Milvus's largest search limit (topk)
DEFAULT_TIMEOUT = 10.0  # seconds: connecting and each call (loading a collection may take longer)
LOAD_TIMEOUT = 900.0
# index type -> (its build parameters, its search parameter); docs/LARGE_GALLERIES.md says which to pick
INDEXES: dict[str, tuple[tuple[str, ...], str | None]] = {
    "FLAT": ((), None), "IVF_FLAT": (("nlist",), "nprobe"), "IVF_SQ8": (("nlist",), "nprobe"),
    "HNSW": (("M", "efConstruction"), "ef"), "DISKANN": ((), "search_list"),
    "GPU_IVF_FLAT": (("nlist",), "nprobe"), "GPU_CAGRA": (("intermediate_graph_degree", "graph_degree"), "itopk_size")}
LITE_INDEXES = ("FLAT", "IVF_FLAT", "IVF_SQ8", "HNSW")  # what Milvus Lite builds (milvus-lite 3.2)
# Milvus builds an IVF per segment: Milvus Lite's hold at most 100k rows (a server's ~1 GB), so the
# default lists follow the folder backend's rule on at most that many rows
SEGMENT_ROWS = 100_000
AT_LEAST_LIMIT = ("ef", "search_list", "itopk_size")  # search parameters Milvus wants >= the limit
SPEC_SEARCH = {"nprobe": "nprobe", "ef": "ef", "search_list": "search_list"}  # spec option -> parameter
ITEM_FIELDS = ["item_id", "path", "fingerprint", "meta"]
MAX_ID, MAX_TEXT = 4096, 8192  # VARCHAR lengths
BATCH_ROWS = 1024  # rows per insert call (ViT-L: 3 MB of vectors)
log = logging.getLogger(__name__)


def is_lite(uri: str) -> bool:
    """Whether `uri` is a Milvus Lite file (run in this process) rather than a server."""
    return not re.match(r"^[a-z][a-z0-9+.-]*://", uri)


@contextmanager
def _errors(where: str) -> Iterator[None]:
    """pymilvus's failures as a GalleryError naming the collection and the server's message; a
    call past its timeout (gRPC's DEADLINE_EXCEEDED) or a server gone says so."""
    import grpc
    from pymilvus.exceptions import MilvusException

    try:
        yield
    except MilvusException as exc:
        raise GalleryError(f"{where}: {getattr(exc, 'message', None) or exc}") from None
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None
        why = ("Milvus did not answer within the timeout (raise it with ?timeout=S)"
               if code == grpc.StatusCode.DEADLINE_EXCEEDED else f"Milvus is unreachable ({code})")
        raise GalleryError(f"{where}: {why}") from None


def connect(uri: str, token: str | None = None, timeout: float = DEFAULT_TIMEOUT, create: bool = False) -> Any:
    """A `pymilvus.MilvusClient` on `uri`, or a GalleryError within `timeout` seconds that says
    why (nothing listening, a Milvus Lite file that is missing or held by another process)."""
    from pymilvus import MilvusClient

    # pymilvus logs each failed call before raising it; the GalleryError below carries the message
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
    if is_lite(uri):
        path = Path(uri).expanduser()
        if path.suffix != ".db":
            raise GalleryError(f"Milvus URI {uri!r}: a Milvus Lite database is a path ending in .db; a server is "
                               "http://host:19530 or https://...")
        if not (path.exists() if not create else path.parent.is_dir()):
            raise GalleryError(f"Milvus URI {uri!r}: " + (f"no Milvus Lite database at {str(path)!r} (build one with "
                               "python -m cir_core.index build --backend milvus)" if not create else
                               f"folder {str(path.parent)!r} does not exist"))
        uri = str(path)
    # pymilvus pings an idle connection every 10 s; Milvus Lite's server refuses pings that often
    # (gRPC's GOAWAY "too_many_pings"): a server on this machine needs no keepalive through a NAT
    local = is_lite(uri) or re.match(r"^[a-z]+://(127\.0\.0\.1|localhost|\[::1\])(:|/|$)", uri)
    options = {"grpc.keepalive_permit_without_calls": 0} if local else {}
    try:
        client = MilvusClient(uri=uri, token=token or "", timeout=timeout, grpc_options=options)
        client.list_collections(timeout=timeout)  # a server that accepts connections but is not Milvus
    except Exception as exc:  # noqa: BLE001 - every failure to reach it is the same message to the user
        why = getattr(exc, "message", None) or str(exc)
        if is_lite(uri) and ("lock" in why.lower() or "Open local milvus failed" in why):
            why += (" (a Milvus Lite file is opened by one process at a time: serve it with `python -m milvus_lite "
                    f"server --data-dir {uri} --port 19530` and use http://127.0.0.1:19530)")
        raise GalleryError(f"cannot reach Milvus at {uri!r} (waited at most {timeout:g} s): {why}") from None
    return client


# -- the index --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MilvusIndex:
    """The vector index a collection is built with: Milvus `type`, its build `params` and its
    default search parameters (`search`; a spec's `?nprobe=`/`?ef=`/`?search_list=` override)."""

    type: str = "IVF_FLAT"
    params: Mapping[str, int] = field(default_factory=lambda: {"nlist": 1024})
    search: Mapping[str, int] = field(default_factory=lambda: {"nprobe": 32})

    @classmethod
    def from_flags(cls, type: str, nlist: int | None = None, nprobe: int = 32, hnsw_m: int = 32,
                   ef_construction: int = 40, ef_search: int = 256, search_list: int = 100) -> "MilvusIndex":
        """The index a build's flags choose (IVF lists unset: 0, chosen by `sized` from the rows)."""
        if type not in INDEXES:
            raise InputError(f"unknown Milvus index {type!r}; choose from {', '.join(INDEXES)}")
        known = {"nlist": nlist or 0, "M": hnsw_m, "efConstruction": ef_construction,
                 "intermediate_graph_degree": 64, "graph_degree": 32}
        search_key = INDEXES[type][1]
        search_value = {"nprobe": nprobe, "ef": ef_search, "search_list": search_list, "itopk_size": 256}
        return cls(type, {k: int(known[k]) for k in INDEXES[type][0]},
                   {search_key: int(search_value[search_key])} if search_key else {})

    def sized(self, n: int) -> "MilvusIndex":
        """This index for `n` rows: IVF lists left unset become the power of two nearest 4 sqrt of
        a segment's rows (at most SEGMENT_ROWS; `cir_core.search.ivf_lists`)."""
        if self.params.get("nlist", 1) != 0:
            return self
        from ..search.index import ivf_lists

        return MilvusIndex(self.type, {**self.params, "nlist": ivf_lists(min(n, SEGMENT_ROWS))}, self.search)

    def search_params(self, limit: int, options: Mapping[str, int | float | str] | None = None) -> dict[str, Any]:
        """Milvus search parameters for `limit` hits (graph beams widened to hold them); `options`
        a gallery spec's (`nprobe`, `ef`, `search_list` set the index's search parameter)."""
        params: dict[str, Any] = dict(self.search)
        options = options or {}
        for opt, key in SPEC_SEARCH.items():
            if opt in options and key == INDEXES[self.type][1]:
                params[key] = int(options[opt])
        for key in AT_LEAST_LIMIT:
            if key in params:
                params[key] = max(int(params[key]), limit)
        return {"metric_type": "COSINE", "params": params}

    def as_json(self) -> str:
        return json.dumps({"type": self.type, "params": dict(self.params), "search": dict(self.search)})

    @classmethod
    def from_json(cls, text: str) -> "MilvusIndex":
        d = json.loads(text)
        return cls(d["type"], d["params"], d["search"])


# -- reading ----------------------------------------------------------------------------------------
def _escape(text: str) -> str:
    """`text` inside a double-quoted Milvus filter string."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


class MilvusStore:
    """One collection as a `cir_core.search.VectorStore` (shortlists with vectors, rows' vectors)
    and a `cir_core.gallery.RowSource` (items by row, a row by id, rows by words). Holds no vectors."""

    def __init__(self, client: Any, collection: str, props: Mapping[str, str],
                 options: Mapping[str, int | float | str], where: str):
        self.client, self.collection, self.where = client, collection, where
        self.index = MilvusIndex.from_json(props["cir.index"])
        self.n, self._dim = int(props["cir.n"]), int(props["cir.dim"])
        self.options = dict(options)
        self.timeout = float(options.get("timeout", DEFAULT_TIMEOUT))
        self._shortlist = int(options.get("shortlist", props.get("cir.shortlist", DEFAULT_SHORTLIST)))
        if not 1 <= self._shortlist <= MAX_TOPK:
            raise GalleryError(f"{where}: shortlist {self._shortlist} is outside 1..{MAX_TOPK} "
                               "(Milvus's largest limit)")
        self.kind = f"Milvus {self.index.type}"

    def __len__(self) -> int:
        return self.n

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def shortlist_size(self) -> int:
        return self._shortlist

    def shortlist(self, q: np.ndarray, size: int) -> list[tuple[np.ndarray, np.ndarray]]:
        limit = max(1, min(int(size), MAX_TOPK, self.n))
        with _errors(self.where):
            found = self.client.search(self.collection, data=np.asarray(q, np.float32).tolist(), limit=limit,
                                       output_fields=["vector"], search_params=self.index.search_params(
                                           limit, self.options), timeout=self.timeout)
        out = []
        for hits in found:
            rows = np.fromiter((h["row"] for h in hits), np.int64, len(hits))
            if hits and "vector" not in hits[0]["entity"]:  # a server that returns no vectors: read them
                out.append((rows, self.vectors(rows)[0]))
                continue
            vecs = np.asarray([h["entity"]["vector"] for h in hits], np.float32).reshape(len(hits), self._dim)
            out.append((rows, vecs))
        return out

    def _get(self, rows: Sequence[int], fields: list[str]) -> list[dict[str, Any]]:
        """The entities at `rows`, in that order (GalleryError naming a row the collection lacks)."""
        rows = [int(r) for r in rows]
        got: dict[int, dict[str, Any]] = {}
        with _errors(self.where):
            for a in range(0, len(rows), 1000):
                for e in self.client.get(self.collection, ids=rows[a:a + 1000], output_fields=fields,
                                         timeout=self.timeout):
                    got[int(e["row"])] = e
        missing = [r for r in rows if r not in got]
        if missing:
            raise GalleryError(f"{self.where}: no row {missing[0]} (the collection holds {self.n}): rebuild it")
        return [got[r] for r in rows]

    def vectors(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ents = self._get(np.asarray(rows).reshape(-1).tolist(), ["vector", "norm"])
        vecs = np.asarray([e["vector"] for e in ents], np.float32).reshape(len(ents), self._dim)
        return vecs, np.asarray([e["norm"] for e in ents], np.float32)

    def items(self, rows: Sequence[int]) -> list[GalleryItem]:
        return [GalleryItem(str(e["item_id"]), e["path"] or None,
                            {**(e["meta"] or {}), "fingerprint": e["fingerprint"]})
                for e in self._get(rows, ITEM_FIELDS)]

    def row_of(self, item_id: str) -> int | None:
        with _errors(self.where):
            got = self.client.query(self.collection, filter=f'item_id == "{_escape(item_id)}"', output_fields=["row"],
                                    limit=1, timeout=self.timeout)
        return int(got[0]["row"]) if got else None

    def find(self, words: Sequence[str], limit: int) -> list[int]:
        if not words:
            return list(range(min(self.n, limit)))
        expr = " and ".join(f'search like "%{_escape(w)}%"' for w in words)
        with _errors(self.where):
            got = self.client.query(self.collection, filter=expr, output_fields=["row", "search"],
                                    limit=min(limit, MAX_TOPK), timeout=self.timeout)
        # LIKE's own wildcards (% and _ inside a word) match more: keep the exact substrings
        return sorted(int(e["row"]) for e in got if all(w in e["search"] for w in words))


def _properties(client: Any, collection: str, where: str) -> dict[str, str] | None:
    """The collection's properties, None when it does not exist."""
    with _errors(where):
        if not client.has_collection(collection):
            return None
        return {str(k): str(v) for k, v in (client.describe_collection(collection).get("properties") or {}).items()}


@register_opener("milvus")
def open_milvus(spec: GallerySpec, ctx: GalleryContext) -> OpenedGallery:
    """`milvus:COLLECTION@URI`: connect (at most `?timeout=` seconds), check the build finished
    and the backbone, load the collection and open its rows as a `RemoteGallery` over a
    `MilvusStore`; images from the Hub gallery `?images=` names, else each row's file, or the
    generated world it was built from."""
    where = f"gallery {spec.text!r}"
    collection = spec.collection
    if collection is None:  # a spec parsed by `parse_gallery_spec` has one
        raise GalleryError(f"{where}: a Milvus gallery is milvus:COLLECTION@URI")
    timeout = float(spec.options.get("timeout", DEFAULT_TIMEOUT))
    client = connect(spec.target, ctx.milvus_token, timeout)
    props = _properties(client, collection, where)
    if props is None:
        with _errors(where):
            have = client.list_collections()
        raise GalleryError(f"{where}: {spec.target!r} has no collection {collection!r} (it has: "
                           f"{', '.join(have) or 'none'}); build it with python -m cir_core.index build "
                           "--backend milvus")
    check_written(props, where)
    if props.get("cir.state") != "complete":
        raise GalleryError(f"{where}: its build has not finished ({props.get('cir.shards_done')} shards inserted): "
                           "rerun the same python -m cir_core.index build command to finish it")
    bb = ctx.backbone
    if bb is not None and (props["cir.backbone"] != bb.id or int(props["cir.dim"]) != bb.dim):
        raise GalleryError(f"{where} was embedded with backbone {props['cir.backbone']!r} (dim {props['cir.dim']}), "
                           f"but the app runs {bb.id!r} (dim {bb.dim}): start the app with the same "
                           "--backbone/--pretrained, or build the collection again with this backbone")
    with _errors(where):
        client.load_collection(collection, timeout=max(timeout, LOAD_TIMEOUT))
    store = MilvusStore(client, collection, props, spec.options, where)
    images = spec.options.get("images")  # a Hub gallery of the same frames (a Space has no local files)
    image_fn = open_images(str(images), ctx) if images else _generated_images(props, ctx)
    return OpenedGallery(RemoteGallery(props.get("cir.name") or collection, store, image_fn=image_fn),
                         store=store)


def check_written(props: Mapping[str, str], where: str) -> None:
    """GalleryError unless the collection was written by this module in a format it reads."""
    if "cir.format" not in props:
        raise GalleryError(f"{where}: the collection was not written by python -m cir_core.index build "
                           "(no cir.format property): choose another collection")
    if props["cir.format"] != FORMAT:
        raise GalleryError(f"{where}: the collection has format {props['cir.format']!r}; this version reads "
                           f"{FORMAT!r}: build it again")


def _generated_images(props: Mapping[str, str], ctx: GalleryContext) -> Any:
    """The source gallery's renderer when the rows are a generated world's (they have no files)."""
    if props.get("cir.source_kind") not in ("world", "films"):
        return None
    from ..world import store  # noqa: F401  (the world openers)
    from ..world.films import benchmark  # noqa: F401

    source = open_gallery_spec(props["cir.source"], GalleryContext(int(props["cir.image_size"]),
                                                                   int(props["cir.world_queries"]), ctx.cache))
    return source.gallery.image_fn


# -- writing ----------------------------------------------------------------------------------------
def search_text(item: GalleryItem) -> str:
    """What the app's gallery search matches an item by: its id, caption and character, lower case."""
    m = item.meta
    who = next((str(m[k]) for k in ("character", "identity", "person") if m.get(k) not in (None, "")), "")
    who += " " + " ".join(map(str, m.get("character_ids") or ()))
    return f"{item.id} {m.get('caption') or m.get('text') or ''} {who}".lower()[:MAX_TEXT]


@dataclass
class MilvusTarget:
    """Where `python -m cir_core.index build --backend milvus` writes: collection `collection` at
    `uri` with `index`; `shortlist`: the rows a query's shortlist holds (a spec may override);
    `replace`: drop a collection embedded with another backbone instead of refusing."""

    uri: str
    collection: str
    index: MilvusIndex = field(default_factory=MilvusIndex)
    token: str | None = None
    shortlist: int = DEFAULT_SHORTLIST
    replace: bool = False
    timeout: float = DEFAULT_TIMEOUT
    shards: int | None = None  # the collection's shards (parallel ingest channels); None: the server's default
    client: Any = None
    checkpoint_s: ClassVar[float] = 30.0  # progress is recorded (after a flush) at most this often

    @property
    def where(self) -> str:
        return f"Milvus collection {self.collection!r} at {self.uri!r}"

    def check(self, backbone: Encoder) -> None:
        """Before any embedding: the server answers, can build the index, and the collection (if
        any) is this tool's and this backbone's (or `replace`)."""
        from ..gallery_spec import COLLECTION_NAME

        if not COLLECTION_NAME.fullmatch(self.collection):
            raise InputError(f"--collection {self.collection!r} is not a Milvus collection name (a letter or _, "
                             "then letters, digits, _)")
        if not 1 <= self.shortlist <= MAX_TOPK:
            raise InputError(f"--shortlist must be in 1..{MAX_TOPK}, got {self.shortlist}")
        if is_lite(self.uri) and self.index.type not in LITE_INDEXES:
            raise InputError(f"Milvus Lite builds {', '.join(LITE_INDEXES)}, not {self.index.type}: use a Milvus "
                             f"server (standalone or distributed; docs/LARGE_GALLERIES.md) for {self.index.type}")
        self.client = self.client or connect(self.uri, self.token, self.timeout, create=True)
        props = _properties(self.client, self.collection, self.where)
        if props is not None:
            check_written(props, self.where)
            if props["cir.backbone"] != backbone.id and not self.replace:
                raise GalleryError(f"{self.where} holds embeddings of backbone {props['cir.backbone']!r}, not "
                                   f"{backbone.id!r}: choose another --collection, or --replace to drop it")

    def write(self, src: Gallery, keys: Sequence[str], load: Callable[[int], Shard], counts: Sequence[int],
              backbone: Encoder, record: dict[str, Any], progress: bool) -> dict[str, Any]:
        """Insert the shards (all embedded; `counts`: each one's readable rows) into the
        collection, resumably, then build the index and load it; returns the build record.
        `record`: source, digest and the other properties the collection keeps."""
        from ..progress import bar as progress_bar

        n_shards = len(counts)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        n = int(offsets[-1])
        if n == 0:
            raise GalleryError(f"no image of {record['source']!r} could be read (see the messages above)")
        self.index = self.index.sized(n)
        record = {**record, "n": n, "index": json.loads(self.index.as_json())}
        done = self._prepare(backbone, record, offsets, progress)
        if done is None:
            return record
        last = time.monotonic()
        with progress_bar(total=n, initial=int(offsets[done]), unit="row", desc=f"inserting into {self.collection}",
                          disable=not progress) as bar:
            for s in range(done, n_shards):
                sh = load(s)
                self._insert(src, keys, sh, int(offsets[s]))
                bar.update(len(sh.rows))
                if time.monotonic() - last >= self.checkpoint_s or s == n_shards - 1:  # resumable: flushed first
                    with _errors(self.where):
                        self.client.flush(self.collection)
                        self.client.alter_collection_properties(self.collection, {"cir.shards_done": str(s + 1)})
                    last = time.monotonic()
        self._finish(progress)
        return record

    def _prepare(self, backbone: Encoder, record: dict[str, Any], offsets: np.ndarray, progress: bool) -> int | None:
        """The first shard to insert (a new collection: 0; a resumed one: where it stopped, rows
        past it deleted), or None when the collection is already complete and up to date."""
        props = _properties(self.client, self.collection, self.where)
        def say(message: str) -> None:  # what happens to the collection, with or without a bar
            print(message, file=sys.stderr)

        if props is not None and (props["cir.backbone"] != backbone.id or props.get("cir.digest") != record["digest"]):
            say(f"{self.where} holds another build (backbone or source changed): dropping it and inserting again")
            with _errors(self.where):
                self.client.drop_collection(self.collection)
            props = None
        if props is not None and props.get("cir.state") == "complete":
            say(f"{self.where} is up to date ({props['cir.n']} rows, {self.index.type})")
            self._set({"cir.shortlist": str(self.shortlist)})
            return None
        if props is None:
            self._create(backbone, record)
            return 0
        done = int(props.get("cir.shards_done", "0"))
        say(f"{self.where}: resuming after {done} shard(s) ({int(offsets[done])} rows)")
        with _errors(self.where):  # rows a killed run inserted past its last recorded shard
            self.client.delete(self.collection, filter=f"row >= {int(offsets[done])}")
        return done

    def _create(self, backbone: Encoder, record: dict[str, Any]) -> None:
        from pymilvus import DataType, MilvusClient

        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("row", DataType.INT64, is_primary=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=int(backbone.dim))
        schema.add_field("norm", DataType.FLOAT)
        schema.add_field("item_id", DataType.VARCHAR, max_length=MAX_ID)
        for name in ("path", "fingerprint", "search"):
            schema.add_field(name, DataType.VARCHAR, max_length=MAX_TEXT)
        schema.add_field("meta", DataType.JSON)
        props = {"cir.format": FORMAT, "cir.backbone": backbone.id, "cir.dim": str(backbone.dim),
                 "cir.shortlist": str(self.shortlist), "cir.state": "inserting", "cir.shards_done": "0",
                 **{f"cir.{k}": v if isinstance(v, str) else json.dumps(v) for k, v in record.items()}}
        index = self.client.prepare_index_params()
        build = dict(self.index.params)
        # pymilvus 3 sends build parameters flattened; Milvus Lite 3.2 reads only the older nested
        # "params" (without it, IVF's nlist silently falls back to 128, HNSW's M to 16): send
        # both, which a server reads alike
        index.add_index(field_name="vector", index_type=self.index.type, metric_type="COSINE",
                        params={**build, "params": build} if build else {})
        index.add_index(field_name="item_id", index_type="INVERTED")  # a reference by id, not a scan
        with _errors(self.where):
            self.client.create_collection(self.collection, schema=schema, properties=props,
                                          **({"num_shards": self.shards} if self.shards else {}))
            # the index first: a server without this index type says so now, not after the inserts
            self.client.create_index(self.collection, index, sync=False)  # _finish waits for it

    def _insert(self, src: Gallery, keys: Sequence[str], sh: Shard, base: int) -> None:
        rows = []
        for j, r in enumerate(sh.rows.tolist()):
            it = src.items[r]
            meta = {k: v for k, v in it.meta.items() if k != "fingerprint"}
            if len(it.id.encode()) > MAX_ID or len(keys[r].encode()) > MAX_TEXT or \
                    len(os.path.abspath(it.path).encode() if it.path else b"") > MAX_TEXT:
                raise GalleryError(f"gallery item {it.id[:80]!r}: its id, path or fingerprint is too long for "
                                   f"the collection ({MAX_ID} / {MAX_TEXT} bytes)")
            try:
                json.dumps(meta)
            except TypeError as exc:
                raise GalleryError(f"gallery item {it.id!r}: a column is not JSON ({exc})") from None
            rows.append({"row": base + j, "vector": sh.emb[j], "norm": float(sh.norms[j]), "item_id": it.id,
                         "path": os.path.abspath(it.path) if it.path else "", "fingerprint": keys[r],
                         "search": search_text(it), "meta": meta})
        with _errors(self.where):
            for a in range(0, len(rows), BATCH_ROWS):
                self.client.insert(self.collection, rows[a:a + BATCH_ROWS], timeout=max(self.timeout, 120))

    def _finish(self, progress: bool) -> None:
        """Wait for the index over every row, load the collection, mark the build complete."""
        with _errors(self.where):
            while True:
                info = self.client.describe_index(self.collection, "vector", timeout=self.timeout)
                if str(info.get("state")) == "Failed":
                    raise GalleryError(f"{self.where}: building the {self.index.type} index failed: "
                                       f"{info.get('index_state_fail_reason') or info}")
                if int(info.get("pending_index_rows", 0)) == 0 and str(info.get("state")) in ("Finished", "3"):
                    break
                time.sleep(1.0)
            self.client.load_collection(self.collection, timeout=LOAD_TIMEOUT)
        self._set({"cir.state": "complete"})
        if progress:
            print(f"{self.where}: complete ({self.index.type} index, loaded)", file=sys.stderr)

    def _set(self, props: dict[str, str]) -> None:
        with _errors(self.where):
            self.client.alter_collection_properties(self.collection, props)
