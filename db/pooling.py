"""Pooling: run every method on a query set, keep who retrieved what, judge each distinct item once.

For each query every (method, scoring) returns its top-k; every hit becomes a `RetrievedItem`
(method, scoring, rank, item, score — never shown to annotators), and the distinct items of a
query become its `Task`s. Judgments on a task are joined back, at analysis time, to every method
that retrieved that item (`db.results.load_set`, used by the report).

    python -m db.pooling --db annotations.sqlite --name world-demo --queries 20 --k 5 --overlap 2
    python -m db.pooling --gallery movienet:/data/movienet-id --backbone ViT-L-14 --pretrained openai \
        --checkpoints my-org/cir-methods --name movienet-200 --queries 200 --k 10 --overlap 2
    python -m db.pooling --gallery milvus:frames@http://host:19530 --queries-file q.jsonl --name frames-50 ...
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cir_core.settings import add_seed_arg
from db import blind
from db import questions as q_registry
from db.models import Query, QuerySet, RetrievedItem, Task, new_secret

if TYPE_CHECKING:
    from cir_core.engine import Engine

MAX_POOL_K = 50
AUTO_IDENTITY = "auto_identity"  # Query.meta key: item id -> the truth's identity label ("yes" / "no")


@dataclass
class PoolQuery:
    """One query to pool: a gallery item as reference, an edit, optional ground truth."""

    external_id: str
    reference_id: str
    edit_text: str
    meta: dict[str, Any] = field(default_factory=dict)
    # item id -> (gold identity, gold edit) where the truth is known (the generated world).
    truth: Callable[[str], tuple[str | None, str | None]] | None = None


def _check_new(session: Session, engine: Engine, name: str, queries: Sequence[PoolQuery],
               methods: Sequence[str]) -> None:
    """What every pooling refuses before it runs anything."""
    if not queries:
        raise ValueError("no queries to pool")
    if not methods:
        raise ValueError("no methods to pool")
    if session.scalars(select(QuerySet).where(QuerySet.name == name)).first() is not None:
        raise ValueError(f"query set {name!r} already exists; pick another name")
    ids = [q.external_id for q in queries]
    if len(set(ids)) != len(ids):
        raise ValueError("query external ids must be unique")
    status = engine.methods.status(list(methods))
    broken = {m: err for m, err in status.items() if err is not None}
    if broken:
        raise ValueError("cannot pool with methods that do not load: " + "; ".join(broken.values()))


def _retrieve(engine: Engine, q: PoolQuery, methods: Sequence[str], scorings: Sequence[str],
              k: int) -> list[tuple[str, str, int, str, float]]:
    """(method, scoring, rank, item, score) of every method x scoring's top k for `q`."""
    ref = engine.reference(q.reference_id)
    rows = []
    for sc in scorings:
        res = engine.compare(ref, q.edit_text, k=k, scoring=sc, methods=list(methods), progression=False)
        for m in res.methods:
            if m.error:
                raise RuntimeError(f"{m.label} failed on query {q.external_id}: {m.error}")
            rows += [(m.name, sc, h.rank, h.item_id, float(h.score)) for h in m.hits]
    return rows


def _check(name: str, k: int, overlap: int, gold_fraction: float) -> None:
    if not name or not name.strip() or len(name) > 200:
        raise ValueError("a query set needs a name of 1-200 characters")
    if not 1 <= int(k) <= MAX_POOL_K:
        raise ValueError(f"k must be between 1 and {MAX_POOL_K}, got {k}")
    if int(overlap) < 1:
        raise ValueError(f"overlap must be >= 1, got {overlap}")
    if not 0.0 <= gold_fraction <= 1.0:
        raise ValueError(f"gold fraction must be in [0, 1], got {gold_fraction}")


def pool_query_set(session: Session, engine: Engine, name: str, queries: Sequence[PoolQuery],
                   methods: Sequence[str], scorings: Sequence[str] = ("cosine", "chord"), k: int = 10,
                   overlap: int = 1, gold_fraction: float = 0.0, seed: int = 0, source: str = "",
                   progress: Callable[[Iterable], Iterable] | None = None,
                   questions: Sequence[str] = (), audit_share: float = 0.0) -> QuerySet:
    """Create query set `name` from `queries` with the top-`k` of every method × scoring.

    `engine` is a `cir_core.engine.Engine` (its `compare` does the retrieval). Gold items: a
    `gold_fraction` of the tasks whose truth is known, drawn with `seed`. `questions`: the
    optional pointwise questions to ask besides identity and edit (e.g. "relevance");
    `audit_share`: the share of agreed pairs a reviewer sees (db.review). Everything is validated
    before the first write and written in one transaction: a failure leaves the DB unchanged.
    """
    _check(name, k, overlap, gold_fraction)
    asked = q_registry.for_set("pointwise", list(questions))
    _check_audit(audit_share)
    _check_new(session, engine, name, queries, methods)
    hits = [(q, _retrieve(engine, q, methods, scorings, k)) for q in (progress or (lambda x: x))(queries)]

    qs = QuerySet(name=name, source=source or getattr(engine.gallery, "name", ""), overlap=int(overlap),
                  pool_k=int(k), meta={"methods": list(methods), "scorings": list(scorings),
                                       "backbone": engine.backbone.id, "gallery": engine.gallery.name,
                                       "gold_fraction": gold_fraction, "seed": seed},
                  mode="pointwise", questions=q_registry.names(asked), audit_share=float(audit_share))
    session.add(qs)
    tasks: list[tuple[Task, PoolQuery]] = []  # in pooling order: what the seeded gold draw reads
    shuffle = random.SystemRandom().shuffle
    for q, rows in hits:
        meta = dict(q.meta or {})
        if q.truth is not None:  # the automatic identity label of every pooled item (never shown)
            auto = {item: q.truth(item)[0] for item in dict.fromkeys(r[3] for r in rows)}
            meta[AUTO_IDENTITY] = {i: v for i, v in auto.items() if v is not None}
        query = Query(query_set=qs, external_id=q.external_id, reference_id=q.reference_id,
                      edit_text=q.edit_text, meta=meta or None)
        session.add(query)
        seen: dict[str, Task] = {}
        for method, sc, rank, item, score in rows:
            session.add(RetrievedItem(query=query, method=method, scoring=sc, rank=rank, item_id=item,
                                      score=score))
            if item not in seen:
                seen[item] = Task(query=query, item_id=item)
                tasks.append((seen[item], q))
        # Blind ids: the tasks are inserted (and so numbered) in a random order, unseeded.
        # In pooling order (scoring, method, rank) a query's lowest task id was one method's
        # rank 1, and anyone who saw ids (an export, the DB) could unblind from them.
        new = list(seen.values())
        shuffle(new)
        session.add_all(new)
        session.flush()  # ids now, in that order
    known = [(t, q) for t, q in tasks if q.truth is not None]
    rng = random.Random(seed)
    chosen = rng.sample(known, round(gold_fraction * len(known)))
    if gold_fraction < 1:
        # Every query keeps a plain pair: gold pairs are given in proportion to a query's plain
        # ones (db.queue.open_tasks), so a query of gold pairs only would never be shown.
        per_query: dict[int, list[int]] = {}
        for i, (t, _) in enumerate(chosen):
            per_query.setdefault(id(t.query), []).append(i)
        size = {}
        for t, _ in tasks:
            size[id(t.query)] = size.get(id(t.query), 0) + 1
        drop = {rng.choice(idx) for key, idx in per_query.items() if len(idx) == size[key]}
        chosen = [c for i, c in enumerate(chosen) if i not in drop]
    for t, q in chosen:
        t.gold_identity, t.gold_edit = q.truth(t.item_id)
    session.commit()
    return qs


def file_queries(path: str | Path) -> list[PoolQuery]:
    """Queries to pool from a JSONL/CSV file, for any gallery: `reference_id` (a gallery item id)
    and `edit` per row, optional `id` (default: q<line>); the other columns are kept as the
    query's meta. No truth: nothing is gold. ValueError naming the file, line and key."""
    from cir_core.errors import InputError
    from cir_core.fileio import read_table

    path = Path(path).expanduser()
    if not path.is_file():
        raise ValueError(f"queries file {str(path)!r} not found")
    rows, _ = read_table(path, InputError)
    out = []
    for line, row in rows:
        for key in ("reference_id", "edit"):
            if not str(row.get(key) or "").strip():
                raise ValueError(f"queries file {str(path)!r} line {line}: no {key!r}")
        meta = {k: v for k, v in row.items() if k not in ("id", "reference_id", "edit")}
        out.append(PoolQuery(str(row.get("id") or f"q{line}"), str(row["reference_id"]).strip(),
                             str(row["edit"]).strip(), meta))
    if not out:
        raise ValueError(f"queries file {str(path)!r} holds no query")
    return out


def _check_audit(audit_share: float) -> None:
    if not 0.0 <= float(audit_share) <= 1.0:
        raise ValueError(f"audit share must be in [0, 1], got {audit_share}")


def pool_pairwise(session: Session, engine: Engine, name: str, queries: Sequence[PoolQuery],
                  combos: Sequence[tuple[str, str]], k: int = 1, overlap: int = 1, source: str = "",
                  progress: Callable[[Iterable], Iterable] | None = None, audit_share: float = 0.0) -> QuerySet:
    """A pairwise set: for every query and every two (method, scoring) `combos`, their results at
    the same rank r <= `k` (top-1 by default) as one task "A or B?", unless both are the same
    item (counted in meta `identical`, never asked). A task two method pairs share is asked once
    and counts for both (joined back through `retrieved_items`). Which item is A (left) is drawn
    per task, keyed by the set's secret (`db.blind.uniform`), and is the task's order
    (`Task.item_id` is A, `Task.item_b_id` B). One transaction, validated first."""
    _check(name, k, overlap, 0.0)
    _check_audit(audit_share)
    combos = [tuple(c) for c in combos]
    if len(combos) < 2 or len(set(combos)) != len(combos):
        raise ValueError(f"a pairwise set needs at least two different (method, scoring), got {combos}")
    methods = list(dict.fromkeys(m for m, _ in combos))
    scorings = list(dict.fromkeys(sc for _, sc in combos))
    _check_new(session, engine, name, queries, methods)
    hits = [(q, _retrieve(engine, q, methods, scorings, k)) for q in (progress or (lambda x: x))(queries)]
    secret = new_secret()
    identical = 0
    qs = QuerySet(name=name, source=source or getattr(engine.gallery, "name", ""), overlap=int(overlap),
                  pool_k=int(k), secret=secret, mode="pairwise",
                  questions=q_registry.names(q_registry.for_set("pairwise", ())), audit_share=float(audit_share),
                  meta={"methods": methods, "scorings": scorings, "pairs": [["/".join(a), "/".join(b)]
                                                                            for a, b in itertools.combinations(combos, 2)],
                        "backbone": engine.backbone.id, "gallery": engine.gallery.name})
    session.add(qs)
    shuffle = random.SystemRandom().shuffle
    for q, rows in hits:
        query = Query(query_set=qs, external_id=q.external_id, reference_id=q.reference_id,
                      edit_text=q.edit_text, meta=dict(q.meta or {}) or None)
        session.add(query)
        at = {}
        for method, sc, rank, item, score in rows:
            if (method, sc) in combos:
                session.add(RetrievedItem(query=query, method=method, scoring=sc, rank=rank, item_id=item,
                                          score=score))
                at[(method, sc, rank)] = item
        pairs: dict[tuple[str, str], Task] = {}
        for a, b in itertools.combinations(combos, 2):
            for r in range(1, k + 1):
                x, y = at.get((*a, r)), at.get((*b, r))
                if x is None or y is None:
                    continue
                if x == y:
                    identical += 1
                    continue
                lo, hi = sorted((x, y))
                if (lo, hi) not in pairs:
                    left = blind.uniform(secret, "side", q.external_id, lo, hi) < 0.5
                    pairs[(lo, hi)] = Task(query=query, item_id=lo if left else hi, item_b_id=hi if left else lo)
        new = list(pairs.values())
        shuffle(new)  # blind ids, as in pool_query_set
        session.add_all(new)
        session.flush()
    qs.meta = {**qs.meta, "identical": identical}
    session.commit()
    return qs


def world_queries(engine: Engine, n: int, skip: int = 0) -> list[PoolQuery]:
    """The first `n` queries of the engine's generated-world benchmark (after `skip`), with the
    world's truth: identity = same character as the reference; edit = the item satisfies the edit
    (yes/no — the world cannot say "partial")."""
    bench = engine.world
    if bench is None:
        raise ValueError("the gallery is not the generated world: give the queries in a file (--queries-file)")
    identities = bench.identities()
    edit_ok = bench.edit_ok_sets()
    row_of = {it.item_id: i for i, it in enumerate(bench.items)}
    out = []
    for qi in range(skip, min(skip + n, len(bench.queries))):
        q, r = bench.queries[qi], bench.reference_idx[qi]
        ok_ids = {bench.items[j].item_id for j in edit_ok[qi]}

        def truth(item_id: str, r=r, ok_ids=ok_ids, row_of=row_of) -> tuple[str, str]:
            same = identities[row_of[item_id]] == identities[r]
            return ("yes" if same else "no", "yes" if item_id in ok_ids else "no")

        out.append(PoolQuery(q.query_id, bench.items[r].item_id, q.text,
                             {"edit_type": q.edit_type}, truth))
    return out



def movienet_queries(engine: Engine, raw: list[dict[str, Any]]) -> list[PoolQuery]:
    """Pool queries from `load_movienet_queryset`'s dicts. Where the query's character id is
    known, identity has a truth (is that character in the candidate frame?); edit has none."""
    chars = {it.id: set(it.meta.get("character_ids") or ()) for it in engine.gallery.items}
    out = []
    for q in raw:
        cid = (q.get("meta") or {}).get("character_id")

        def truth(item_id: str, cid=cid) -> tuple[str | None, str | None]:
            return ("yes" if cid in chars.get(item_id, ()) else "no"), None

        out.append(PoolQuery(q["external_id"], q["reference_id"], q["edit_text"], q.get("meta") or {},
                             truth if cid else None))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: pool a query set from the app's gallery into the annotation DB."""
    import argparse

    from cir_core.engine import load_engine
    from cir_core.engine.core import SHOWCASE
    from cir_core.errors import CIRError
    from cir_core.gallery_spec import parse_gallery_spec
    from cir_core.progress import bar as progress_bar
    from cir_core.settings import EngineConfig, add_engine_args, settings_from
    from db.migrate import init_db
    from db.sqlite import open_db, session_factory

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_engine_args(ap, methods_help="the app's columns (the baseline left out)")
    ap.add_argument("--db", default="annotations.sqlite", help="the annotation DB (a SQLite file or a "
                    "SQLAlchemy URL such as postgresql://user:pass@host/db)")
    ap.add_argument("--name", required=True, help="query set name (unique in the DB)")
    ap.add_argument("--queries", type=int, default=20, help="queries to pool (the first N of the world "
                    "benchmark, of a MovieNet set given as --gallery movienet:ROOT, or of --queries-file)")
    ap.add_argument("--queries-file", default=None, help="JSONL/CSV of queries for any gallery (an index folder, "
                    "a Hub or Milvus gallery): reference_id, edit, optional id and more columns")
    ap.add_argument("--k", type=int, default=5, help="top-k of every method × scoring to pool")
    ap.add_argument("--scorings", nargs="+", default=["cosine", "chord"])
    ap.add_argument("--overlap", type=int, default=1, help="annotators per (non-gold) task")
    ap.add_argument("--gold", type=float, default=0.0, help="fraction of tasks with known answers as gold")
    add_seed_arg(ap, what="the gold draw")
    ap.add_argument("--questions", default="", help="optional questions besides identity and edit, "
                    "comma-separated (declared in db/questions.py: relevance)")
    ap.add_argument("--audit", type=float, default=0.0, help="share of agreed pairs a reviewer also sees "
                    "(disagreements always; docs/ANNOTATION.md, Adjudication)")
    ap.add_argument("--pairwise", action="store_true", help="a pairwise set: every two method x scoring's "
                    "results at the same rank (top-1 with --k 1) as 'A or B?' tasks (docs/ANNOTATION.md)")
    args = ap.parse_args(argv)
    try:
        cfg = settings_from(EngineConfig, args)
        spec = parse_gallery_spec(cfg.gallery)
        if args.queries_file:
            file_queries(args.queries_file)  # a bad file fails before the engine loads
    except (CIRError, ValueError) as exc:
        ap.error(str(exc))
    engine = load_engine(cfg, progress_cb=None)
    if args.queries_file:
        queries = file_queries(args.queries_file)[:args.queries]
    elif spec.kind == "movienet":
        from cir_core.benchmarks import load_movienet_queryset

        raw = load_movienet_queryset(spec.path)[0]
        queries = movienet_queries(engine, raw)[:args.queries]
    else:
        queries = world_queries(engine, args.queries,
                                skip=SHOWCASE if spec.kind == "world" and spec.target == "test" else 0)
    eng = open_db(args.db)
    init_db(eng)
    methods = list(cfg.methods or engine.methods.columns)
    bar = lambda x: progress_bar(x, desc="pooling")  # noqa: E731
    with session_factory(eng)() as s:
        try:
            if args.pairwise:
                if args.gold or args.questions:
                    raise ValueError("a pairwise set has no gold and asks only its preference question")
                qs = pool_pairwise(s, engine, args.name, queries, [(m, sc) for m in methods for sc in args.scorings],
                                   args.k, args.overlap, progress=bar, audit_share=args.audit)
            else:
                qs = pool_query_set(s, engine, args.name, queries, methods, args.scorings, args.k, args.overlap,
                                    args.gold, args.seed, progress=bar,
                                    questions=[x for x in args.questions.split(",") if x.strip()],
                                    audit_share=args.audit)
        except ValueError as exc:
            ap.error(str(exc))
        n_tasks = s.scalar(select(func.count()).select_from(Task).join(Query).where(Query.query_set_id == qs.id))
    print(f"query set {args.name!r}: {len(queries)} queries, {n_tasks} tasks in {args.db}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
