"""Figures from an annotated campaign, in the style of the PACT paper's MovieNet figures (Figs. 7–11):
per query the reference with the character's box and name, the edit, and one row per method with
its top result(s) as pooled; a red cross where people judged the character not preserved (the
majority answer), a blue dot where the cast labels say the character is there. PNG and PDF through
`cir_core.figures` (render / save).

The queries are chosen from the set's disagreements: first where the two methods compared
(default PACT and compose-only) got opposite human verdicts on their top 1, then where the cast
labels and the people disagree on a shown result; ties broken by query order.

    python -m db.campaign_figures --db ann.sqlite --set movienet-200 --root SET \\
        --out fig.png --out fig.pdf [--methods pact compose-only dice pace] [--n 4] [--k 1]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from sqlalchemy import select

from cir_core.character_mark import draw_mark, mark_from
from cir_core.errors import CIRError, InputError
from cir_core.figures import Cell, Panel, render, save
from db.human_auto import majority
from db.models import Query
from db.results import SetData, load_set

THUMB = 192


def _top(data: SetData, method: str, scoring: str, qid: int, k: int) -> list[str]:
    ranks = data.rankings.get((method, scoring), {}).get(qid, {})
    return [ranks[r] for r in range(1, k + 1) if r in ranks]


def choose(data: SetData, methods: Sequence[str], scoring: str, n: int) -> list[int]:
    """`n` query ids: the compared methods' top-1 verdicts opposite first, then label-vs-people."""
    human, _ = majority(data)

    def verdict(qid: int, m: str) -> str | None:
        top = _top(data, m, scoring, qid, 1)
        return human.get(data.task_of.get((qid, top[0]))) if top else None

    a, b = methods[0], methods[1] if len(methods) > 1 else methods[0]
    split = [q for q in data.query_ids if None not in (verdict(q, a), verdict(q, b)) and verdict(q, a) != verdict(q, b)]
    mixed = [q for q in data.query_ids if q not in split and any(
        (t := data.task_of.get((q, it))) in human and t in data.auto_identity and human[t] != data.auto_identity[t]
        for m in methods for it in _top(data, m, scoring, q, 1))]
    return (split + mixed)[:n]


def campaign_panels(session: Any, set_name: str, root: str | Path, methods: Sequence[str], n: int = 4,
                    k: int = 1, scoring: str = "cosine") -> list[Panel]:
    """The panels of `choose`'s queries, images read from the MovieNet set under `root`."""
    from cir_core.benchmarks import load_movienet_queryset

    data = load_set(session, set_name)
    missing = [m for m in methods if (m, scoring) not in data.rankings]
    if missing:
        known = sorted({m for m, s in data.rankings if s == scoring})
        raise InputError(f"set {set_name!r} pooled no {', '.join(missing)} with {scoring} (it has {known})")
    _, gallery = load_movienet_queryset(root)
    human, _ = majority(data)
    meta = dict(session.execute(select(Query.id, Query.meta).where(Query.id.in_(data.query_ids))).all())
    rows = {q: (ext, ref, text) for q, ext, ref, text in session.execute(
        select(Query.id, Query.external_id, Query.reference_id, Query.edit_text).where(Query.id.in_(data.query_ids)))}

    def image(item: str, mark=None):
        i = gallery.index_of(item)
        return draw_mark(gallery.load_image(i, THUMB), mark)

    panels = []
    for qid in choose(data, methods, scoring, n):
        ext, ref, text = rows[qid]
        m = meta.get(qid) or {}
        mark = mark_from(m, gallery.items[gallery.index_of(ref)].meta.get("resolution"))
        who = f" · {m['character_name']}" if m.get("character_name") else ""
        cells = []
        for method in methods:
            out = []
            for it in _top(data, method, scoring, qid, k):
                t = data.task_of.get((qid, it))
                auto = data.auto_identity.get(t)
                out.append(Cell(image(it), None, None, None if auto is None else auto == "yes",
                                None if t not in human else human[t] != "yes"))
            cells.append((method, out or "not pooled"))
        panels.append(Panel(image(ref, mark), text, f"{ext}{who}", cells))
    if not panels:
        raise InputError(f"set {set_name!r} has no query where {' and '.join(methods[:2])} disagree or the "
                         "people disagree with the cast labels (is it annotated?)")
    return panels


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m db.campaign_figures", description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--set", required=True, dest="set_name")
    ap.add_argument("--root", required=True, help="the MovieNet set's folder (as pooled with --gallery movienet:ROOT)")
    ap.add_argument("--out", action="append", required=True, help="fig.png and/or fig.pdf (repeatable)")
    ap.add_argument("--methods", nargs="+", default=["pact", "compose-only"],
                    help="rows; the first two are the pair whose disagreements are chosen first")
    ap.add_argument("--scoring", default="cosine")
    ap.add_argument("--n", type=int, default=4, help="queries (panels)")
    ap.add_argument("--k", type=int, default=1, help="results per method (pooled ranks)")
    a = ap.parse_args(argv)
    from db.sqlite import open_db, session_factory

    engine = open_db(a.db)
    try:
        with session_factory(engine)() as s:
            panels = campaign_panels(s, a.set_name, a.root, a.methods, a.n, a.k, a.scoring)
        fig = render(panels, scores=False)
        for out in a.out:
            print(save(fig, out))
    except CIRError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
