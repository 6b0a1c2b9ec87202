"""A small synthetic annotation DB, filled through the public API, to try the report and export.

    python -m db.demo_data --db demo.sqlite [--seed 0]

Made-up rankings and labels (NOT results): 12 queries, sum/dice/pace x cosine/chord, pool depth
5, overlap 2, three annotators with 10 % label noise, two gold tasks, a few skips, comments with
commas and newlines, and a handful of pooled tasks left unjudged so coverage is incomplete.
"""
from __future__ import annotations

import argparse
import random
from pathlib import Path

from cir_core.settings import add_seed_arg
from db.judgments import upsert_judgment
from db.migrate import init_db
from db.models import Annotator, Query, QuerySet, RetrievedItem, Task
from db.sqlite import open_db, session_factory

METHODS = (("sum", 0.3), ("dice", 0.6), ("pace", 0.8))  # (name, how well it ranks good items)
SCORINGS = (("cosine", 0.0), ("chord", 0.1))
ANNOTATORS = ("alice", "bob", "carol")
GALLERY = [f"movienet/tt{1000 + i}/shot_{i:03d}.jpg" for i in range(40)]


def _noisy(label: str, values: tuple[str, ...], rng: random.Random) -> str:
    return rng.choice(values) if rng.random() < 0.1 else label


def populate(path: Path, seed: int = 0, n_queries: int = 12, pool_k: int = 5) -> None:
    """Create the demo DB at `path` (which must not exist)."""
    if path.exists():
        raise SystemExit(f"{path} exists; choose a new file (this script never overwrites)")
    rng = random.Random(seed)
    engine = open_db(path)
    init_db(engine)
    with session_factory(engine)() as s:
        qs = QuerySet(name="demo", source="synthetic", overlap=2, pool_k=pool_k,
                      meta={"methods": [m for m, _ in METHODS], "note": "made-up data"})
        anns = [Annotator(name=n) for n in ANNOTATORS]
        s.add_all([qs, *anns])
        tasks: list[Task] = []
        truth: dict[int, tuple[str, str]] = {}
        for qi in range(n_queries):
            q = Query(query_set=qs, external_id=f"q{qi:03d}", reference_id=rng.choice(GALLERY),
                      edit_text=rng.choice(["make it night", "add rain, then zoom out",
                                            "she now wears a red coat"]))
            s.add(q)
            quality = {item: rng.random() for item in GALLERY}
            pooled: dict[str, Task] = {}
            for (method, skill), (scoring, bonus) in ((m, sc) for m in METHODS for sc in SCORINGS):
                noisy = {it: (skill + bonus) * quality[it] + rng.random() for it in GALLERY}
                top = sorted(GALLERY, key=noisy.get, reverse=True)[:pool_k]
                for rank, item in enumerate(top, start=1):
                    s.add(RetrievedItem(query=q, method=method, scoring=scoring, rank=rank,
                                        item_id=item, score=round(noisy[item], 4)))
                    if item not in pooled:
                        pooled[item] = Task(query=q, item_id=item)
                        s.add(pooled[item])
            s.flush()
            for item, task in pooled.items():
                identity = "yes" if quality[item] > 0.75 else rng.choice(["no", "no", "cant_tell"])
                edit = "yes" if quality[item] > 0.7 else "partial" if quality[item] > 0.4 else "no"
                truth[task.id] = (identity, edit)
                tasks.append(task)
        gold = rng.sample(tasks, 2)
        for t in gold:
            t.gold_identity, t.gold_edit = truth[t.id]
        s.commit()
        unjudged = {t.id for t in rng.sample([t for t in tasks if t not in gold], 6)}
        for t in tasks:
            if t.id in unjudged:
                continue
            judges = anns if t in gold else rng.sample(anns, qs.overlap)
            for pos, a in enumerate(judges, start=1):
                identity, edit = truth[t.id]
                if rng.random() < 0.04:
                    upsert_judgment(s, a.id, t.id, None, None, skip_reason="image did not load",
                                    time_spent_ms=rng.randint(500, 4000), shown_position=pos)
                    continue
                comment = rng.choice([None] * 8 + ['face hidden, "maybe" her\nsecond line',
                                                   "coat is red, not crimson"])
                upsert_judgment(s, a.id, t.id, _noisy(identity, ("yes", "no", "cant_tell"), rng),
                                _noisy(edit, ("yes", "partial", "no"), rng), comment=comment,
                                time_spent_ms=rng.randint(1500, 20000), shown_position=pos)
        s.commit()
    engine.dispose()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m db.demo_data", description=__doc__.splitlines()[0])
    p.add_argument("--db", required=True, type=Path, help="new SQLite file to create")
    add_seed_arg(p, what="the made-up judgments")
    args = p.parse_args(argv)
    populate(args.db, args.seed)
    print(f"demo annotation DB written to {args.db}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
