"""The registry of published cells: a JSON file read with the standard library and validated on
load, every error naming the file, the entry (a row by its index and id) and the key.

A registry holds named `tables` (where the cells were printed and how they read), `backbones`
(open_clip name and weights tag, and how the tag was read), `checkpoints` (where a method's
weights come from: none, the authors' release with its convert command, this project's recipe,
unreleased, the shipped world checkpoints, or an LLM), `datasets` (where a benchmark's files come
from and how they are laid out; the rehearsal's say how to export them from the world),
`tolerances` (points, and why), `derived` metrics (means of measured ones, e.g. GeneCIS's
summaries) and `rows`: one per (method, backbone, checkpoint, benchmark, split, protocol,
preprocessing, scoring and λ) with its published `values` in percent. A published row also quotes
the paper's line it was read from, and its values are checked against that line here.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from cir_core.errors import InputError
from cir_core.fileio import loads_json

HERE = Path(__file__).resolve().parent
PUBLISHED = HERE / "published.json"
REHEARSAL = HERE / "rehearsal.json"
NAMED = {"published": PUBLISHED, "rehearsal": REHEARSAL}
KINDS = ("published", "rehearsal")
CHECKPOINT_KINDS = {  # kind -> its required keys (besides "kind")
    "none": (), "release": ("where", "convert", "folder"), "recipe": ("train", "folder"),
    "unreleased": ("why", "folder"), "shipped": ("folder",), "llm": ("needs",)}
SPLITS = {"cirr": ("val", "test"), "circo": ("val", "test"), "fashioniq": ("val", "test"),
          "genecis": ("val",), "lcirr": ("val", "test")}
STORED = ("cirr", "circo", "fashioniq", "lcirr")  # galleries of files as stored: --preprocess applies


class RegistryError(InputError):
    """A registry file is malformed; the message names the file, the entry and the key."""


def measured_metrics() -> dict[str, tuple[str, ...]]:
    """Each benchmark's metric names as its evaluator reports them (a test checks them against
    the evaluators' output on the world's exports)."""
    from cir_core.benchmarks.fashioniq import CATEGORIES, KS
    from cir_core.benchmarks.genecis import TASKS

    cirr = ("R@1", "R@5", "R@10", "R@50", "Rs@1", "Rs@2", "Rs@3")
    return {"cirr": cirr, "lcirr": cirr,
            "circo": tuple(f"{m}@{k}" for m in ("mAP", "R") for k in (5, 10, 25, 50)),
            "fashioniq": (*(f"{c} R@{k}" for c in CATEGORIES for k in KS), *(f"avg R@{k}" for k in KS), "avg"),
            "genecis": (*(f"{t} R@{k}" for t in TASKS for k in (1, 2, 3)), "mean R@1")}


def protocols() -> dict[str, tuple[str, ...]]:
    """The named protocols of the benchmarks that take one."""
    from cir_core.benchmarks import circo, fashioniq

    return {"circo": tuple(circo.PROTOCOLS), "fashioniq": tuple(fashioniq.PROTOCOLS)}


@dataclass(frozen=True)
class Table:
    key: str
    paper: str
    text: str  # the paper's text file (../shared/seeds/ in this project's layout)
    table: str
    caption: str
    reads: str  # how the table's cells are read (split, backbone, anything not printed in it)
    decimals: int  # digits after the point the values are printed with
    columns: tuple[str, ...]  # "benchmark:metric[:scoring]" or "lambda", one per number of a row's line


@dataclass(frozen=True)
class Backbone:
    key: str
    model: str
    pretrained: str | None
    paper_name: str
    basis: str  # where the name and tag come from
    stated: bool  # the tag is printed in the paper (False: read as `basis` says)
    gpu: str | None  # why a GPU is needed in practice; None: CPU will do


@dataclass(frozen=True)
class Checkpoint:
    key: str
    kind: str
    folder: str | None = None  # under --checkpoints (shipped: under the repo)
    where: str | None = None
    convert: str | None = None
    train: str | None = None
    why: str | None = None
    needs: str | None = None


@dataclass(frozen=True)
class Dataset:
    key: str
    benchmark: str
    get: str
    layout: str
    server: str | None = None  # the test split's evaluation server
    export: dict[str, Any] | None = None  # rehearsal: cir_core.world.export's arguments


@dataclass(frozen=True)
class Tolerance:
    key: str
    points: float
    why: str


@dataclass(frozen=True)
class Row:
    id: str
    table: str
    label: str
    method: str
    backbone: str
    checkpoint: str
    benchmark: str
    data: str
    split: str
    protocol: str | None
    preprocess: str | None
    subset: str | None
    scoring: str
    lam: float | None
    values: dict[str, float]
    tolerance: str
    quote: str | None
    assumed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Registry:
    path: Path
    kind: str
    about: str
    tables: dict[str, Table]
    backbones: dict[str, Backbone]
    checkpoints: dict[str, Checkpoint]
    datasets: dict[str, Dataset]
    tolerances: dict[str, Tolerance]
    derived: dict[str, dict[str, tuple[str, ...]]]
    rows: tuple[Row, ...]
    left_out: tuple[dict[str, str], ...] = ()
    recorded: dict[str, Any] = field(default_factory=dict)

    def table_rows(self, table: str) -> list[Row]:
        """The rows of `table` ("all": every row), in file order; RegistryError for an unknown table."""
        if table == "all":
            return list(self.rows)
        if table not in self.tables:
            raise RegistryError(f"{self.path.name}: no table {table!r}; tables: {', '.join(self.tables)}, all")
        return [r for r in self.rows if r.table == table]

    def metrics(self, benchmark: str) -> set[str]:
        """The metric names a row of `benchmark` may publish: measured and derived."""
        return set(measured_metrics()[benchmark]) | set(self.derived.get(benchmark, {}))


class Reader:
    """Typed access to one JSON object of the file, errors naming where it is."""

    def __init__(self, obj: Any, where: str):
        if not isinstance(obj, dict):
            raise RegistryError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        self.obj, self.where = obj, where

    def get(self, key: str, kind: type | tuple[type, ...], optional: bool = False) -> Any:
        if key not in self.obj:
            if optional:
                return None
            raise RegistryError(f"{self.where}: missing key {key!r}")
        v = self.obj[key]
        if v is None and optional:
            return None
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if isinstance(v, bool) != (bool in kinds) or not isinstance(v, kinds):
            names = "/".join(k.__name__ for k in kinds)
            raise RegistryError(f"{self.where}: key {key!r} should be {names}, got {type(v).__name__}")
        return v

    def only(self, allowed: set[str]) -> None:
        extra = sorted(set(self.obj) - allowed)
        if extra:
            raise RegistryError(f"{self.where}: unknown key {extra[0]!r} (allowed: {', '.join(sorted(allowed))})")

    def fail(self, key: str, why: str) -> RegistryError:
        return RegistryError(f"{self.where}: key {key!r}: {why}")


def quote_numbers(quote: str) -> list[float | None]:
    """The numeric cells of a table line as printed (tab-separated): `12.34`, `$a\\to b$` (two
    numbers) and a dash (None, an unreported cell); label cells are skipped."""
    out: list[float | None] = []
    for cell in (c.strip() for c in quote.split("\t")):
        if re.fullmatch(r"\d+\.\d+", cell):
            out.append(float(cell))
        elif m := re.fullmatch(r"\$(\d+\.\d+)\\to (\d+\.\d+)\$", cell):
            out += [float(m[1]), float(m[2])]
        elif cell in ("-", "\u2013"):
            out.append(None)
    return out


def load_registry(path: str | Path = PUBLISHED) -> Registry:
    """The registry at `path` ("published" and "rehearsal" name the shipped ones), validated."""
    path = NAMED.get(str(path), Path(path))
    if not path.is_file():
        raise RegistryError(f"{path}: registry file not found")
    try:
        raw = loads_json(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise RegistryError(f"{path}: not valid JSON ({e})") from None
    top = Reader(raw, str(path))
    top.only({"kind", "about", "recorded", "tables", "backbones", "checkpoints", "datasets", "tolerances",
              "derived", "rows", "left_out"})
    kind = top.get("kind", str)
    if kind not in KINDS:
        raise top.fail("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    recorded = top.get("recorded", dict, optional=True) or {}
    if kind == "rehearsal" and not recorded:
        raise top.fail("recorded", "a rehearsal registry says where and when its values were recorded")
    name = path.name

    def section(key: str) -> dict[str, Reader]:
        return {k: Reader(v, f"{name}: {key}[{k!r}]") for k, v in top.get(key, dict).items()}

    tables = {k: read_table(k, r) for k, r in section("tables").items()}
    backbones = {k: read_backbone(k, r) for k, r in section("backbones").items()}
    checkpoints = {k: read_checkpoint(k, r) for k, r in section("checkpoints").items()}
    datasets = {k: read_dataset(k, r) for k, r in section("datasets").items()}
    tolerances = {k: read_tolerance(k, r) for k, r in section("tolerances").items()}
    derived = read_derived(top.get("derived", dict, optional=True) or {}, name)
    reg = Registry(path, kind, top.get("about", str), tables, backbones, checkpoints, datasets, tolerances,
                   derived, (), tuple(top.get("left_out", list, optional=True) or ()), recorded)
    rows, seen = [], set()
    for i, obj in enumerate(top.get("rows", list)):
        rid = obj.get("id") if isinstance(obj, dict) else None
        row = read_row(Reader(obj, f"{name}: rows[{i}]" + (f" (id {rid!r})" if rid else "")), reg)
        if row.id in seen:
            raise RegistryError(f"{name}: rows[{i}]: duplicate id {row.id!r}")
        seen.add(row.id)
        rows.append(row)
    if not rows:
        raise RegistryError(f"{name}: key 'rows' is empty")
    return replace(reg, rows=tuple(rows))


def read_table(key: str, r: Reader) -> Table:
    r.only({"paper", "text", "table", "caption", "reads", "decimals", "columns"})
    decimals = r.get("decimals", int)
    if not 0 <= decimals <= 6:
        raise r.fail("decimals", f"must be 0..6, got {decimals}")
    cols = r.get("columns", list, optional=True) or []
    if not all(isinstance(c, str) for c in cols):
        raise r.fail("columns", "should be a list of strings")
    return Table(key, r.get("paper", str), r.get("text", str), r.get("table", str), r.get("caption", str),
                 r.get("reads", str), decimals, tuple(cols))


def read_backbone(key: str, r: Reader) -> Backbone:
    r.only({"model", "pretrained", "paper_name", "basis", "stated", "gpu"})
    return Backbone(key, r.get("model", str), r.get("pretrained", str, optional=True), r.get("paper_name", str),
                    r.get("basis", str), r.get("stated", bool), r.get("gpu", str, optional=True))


def read_checkpoint(key: str, r: Reader) -> Checkpoint:
    kind = r.get("kind", str)
    if kind not in CHECKPOINT_KINDS:
        raise r.fail("kind", f"must be one of {', '.join(CHECKPOINT_KINDS)}, got {kind!r}")
    need = CHECKPOINT_KINDS[kind]
    r.only({"kind", *need})
    return Checkpoint(key, kind, **{k: r.get(k, str) for k in need})


def read_dataset(key: str, r: Reader) -> Dataset:
    r.only({"benchmark", "get", "layout", "server", "export"})
    bench = r.get("benchmark", str)
    if bench not in SPLITS:
        raise r.fail("benchmark", f"must be one of {', '.join(SPLITS)}, got {bench!r}")
    export = r.get("export", dict, optional=True)
    if export is not None:
        e = Reader(export, r.where + " export")
        e.only({"format", "split", "n_queries", "image_size", "category"})
        e.get("format", str), e.get("split", str), e.get("n_queries", int)
    return Dataset(key, bench, r.get("get", str), r.get("layout", str), r.get("server", str, optional=True), export)


def read_tolerance(key: str, r: Reader) -> Tolerance:
    r.only({"points", "why"})
    points = r.get("points", float)
    if not (math.isfinite(points) and points >= 0):
        raise r.fail("points", f"must be a finite number >= 0, got {points}")
    return Tolerance(key, points, r.get("why", str))


def read_derived(raw: dict, name: str) -> dict[str, dict[str, tuple[str, ...]]]:
    known = measured_metrics()
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for bench, defs in raw.items():
        r = Reader(defs, f"{name}: derived[{bench!r}]")
        if bench not in known:
            raise RegistryError(f"{name}: derived: unknown benchmark {bench!r}")
        out[bench] = {}
        for metric in defs:
            src = r.get(metric, list)
            bad = [s for s in src if s not in known[bench]]
            if not src or bad:
                raise r.fail(metric, f"should list {bench} metrics to average, got {bad[0] if bad else 'none'!r}")
            out[bench][metric] = tuple(src)
    return out


ROW_KEYS = {"id", "table", "label", "method", "backbone", "checkpoint", "benchmark", "data", "split", "protocol",
            "preprocess", "subset", "scoring", "lambda", "values", "tolerance", "quote", "assumed"}


def read_row(r: Reader, reg: Registry) -> Row:
    from cir_core.benchmarks.common import PREPROCESS
    from cir_core.methods import list_methods
    from cir_core.methods.base import get_method_class
    from cir_core.search.scoring import SCORINGS

    r.only(ROW_KEYS)
    rid = r.get("id", str)
    refs: dict[str, Mapping[str, object]] = {"table": reg.tables, "backbone": reg.backbones,
                                             "checkpoint": reg.checkpoints, "tolerance": reg.tolerances}
    got = {k: r.get(k, str) for k in refs}
    for k, entries in refs.items():
        if got[k] not in entries:
            raise r.fail(k, f"no such entry {got[k]!r} in {k}s ({', '.join(entries)})")
    method = r.get("method", str)
    if method not in list_methods():
        raise r.fail("method", f"unknown method {method!r}; registered: {', '.join(list_methods())}")
    bench = r.get("benchmark", str)
    if bench not in SPLITS:
        raise r.fail("benchmark", f"must be one of {', '.join(SPLITS)}, got {bench!r}")
    data = r.get("data", str, optional=True) or bench
    if data not in reg.datasets or reg.datasets[data].benchmark != bench:
        raise r.fail("data", f"needs a dataset entry {data!r} of benchmark {bench} in datasets")
    split = r.get("split", str)
    if split not in SPLITS[bench]:
        raise r.fail("split", f"{bench} has splits {', '.join(SPLITS[bench])}, got {split!r}")
    protocol = r.get("protocol", str, optional=True)
    choices = protocols().get(bench, ())
    if protocol is not None and protocol not in choices:
        raise r.fail("protocol", f"{bench} takes " + (f"one of {', '.join(choices)}" if choices else "no protocol")
                     + f", got {protocol!r}")
    pre = r.get("preprocess", str, optional=True)
    if pre is not None and (pre not in PREPROCESS or bench not in STORED):
        raise r.fail("preprocess", f"one of {', '.join(PREPROCESS)} for {', '.join(STORED)} only, "
                     f"got {pre!r} for {bench}")
    scoring = r.get("scoring", str)
    if scoring not in SCORINGS:
        raise r.fail("scoring", f"must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    lam = r.get("lambda", float, optional=True)
    if lam is not None and (scoring != "chord" or not math.isfinite(lam)):
        raise r.fail("lambda", "a finite λ goes with scoring 'chord' only")
    values = r.get("values", dict)
    known = reg.metrics(bench)
    for m, v in values.items():
        if m not in known:
            raise r.fail("values", f"{bench} has no metric {m!r} (known: {', '.join(sorted(known))})")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise r.fail("values", f"{m!r} should be a number (percent), got {v!r}")
    if not values:
        raise r.fail("values", "no published value")
    ck = reg.checkpoints[got["checkpoint"]]
    needs_ckpt = get_method_class(method).needs_checkpoint
    if needs_ckpt == (ck.kind in ("none", "llm")):
        raise r.fail("checkpoint", f"{method} {'needs' if needs_ckpt else 'takes no'} checkpoint, "
                     f"but {ck.key!r} is of kind {ck.kind}")
    assumed = r.get("assumed", list, optional=True) or []
    if not all(isinstance(a, str) for a in assumed):
        raise r.fail("assumed", "should be a list of strings")
    quote = r.get("quote", str, optional=True)
    row = Row(rid, got["table"], r.get("label", str), method, got["backbone"], got["checkpoint"], bench, data,
              split, protocol, pre, r.get("subset", str, optional=True), scoring, lam,
              {m: float(v) for m, v in values.items()}, got["tolerance"], quote, tuple(assumed))
    if reg.kind == "published":
        if quote is None:
            raise r.fail("quote", "a published row quotes the paper's line its values were read from")
        check_quote(row, reg.tables[row.table], r)
    return row


def check_quote(row: Row, table: Table, r: Reader) -> None:
    """The row's values (and λ) are the quoted line's numbers in the table's columns for its
    benchmark and scoring, every one of them."""
    nums = quote_numbers(row.quote or "")
    if len(nums) != len(table.columns):
        raise r.fail("quote", f"has {len(nums)} numeric cells, table {table.key} has {len(table.columns)} columns")
    covered = set()
    for col, num in zip(table.columns, nums):
        if col == "lambda":
            if row.scoring == "chord" and row.lam != num:
                raise r.fail("lambda", f"{row.lam} but the quoted line prints {num}")
            continue
        bench, metric, *sc = col.split(":")
        if bench != row.benchmark or (sc and sc[0] != row.scoring) or num is None:
            continue
        covered.add(metric)
        if row.values.get(metric) != num:
            raise r.fail("values", f"{metric!r} is {row.values.get(metric)} but the quoted line prints {num}")
    extra = sorted(set(row.values) - covered)
    if extra:
        raise r.fail("values", f"{extra[0]!r} is not a column of the quoted line for {row.benchmark}/{row.scoring}")
