"""Publish a campaign's labels as a Hugging Face dataset, through the project's storage layer
(the Hub, or a folder standing in for it), pinned to the commit it made.

    python -m db.publish --db ann.sqlite --set NAME --repo org/name [--tag v1] [--local-hub DIR]
        [--salt SECRET] [--out DIR] [--pool-depth K]

What the dataset holds (docs/ANNOTATION.md, "Publishing"):

- `data/labels.parquet`: one row per pair — the query (`query_id`, `reference_frame`, `edit`), the
  candidate's frame id (`item_id`; `item_b_id` for a pairwise pair, B), the **final labels** (a
  reviewer's decision, else the majority; db/labels.py) with `label_source` and the adjudication
  reason, the qrels `grade`, how many answered, the gold answers where the pair was gold;
- `data/judgments.parquet`: the **raw labels**, one row per judgment, the annotator **pseudonymised**
  (HMAC-SHA256 with `--salt`, or a fresh random salt that is written nowhere), without comments
  (free text can name people);
- `data/adjudications.parquet`: the decisions, the reviewer pseudonymised, without notes;
- `data/queries.parquet`, `data/pool.parquet`: the queries and who retrieved what at which rank
  (the pooling, published once the campaign is over);
- `qrels.txt` (graded, judged pairs only) and `qrels_pool<K>.txt` (pooled unjudged items as -1), for
  a pointwise set;
- `README.md`: the dataset card — what it is, how to load it at this revision, the guidelines, the
  agreement table, the method table, the pooling, the qrels mapping and the pseudonymisation.

The push is one commit with a sha256 manifest (`cir_core.storage.repo.push`, kind `labels`); it
is read back at that commit and verified before the command reports the pinned spec.
"""
from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cir_core.errors import CIRError, InputError
from db import guidelines
from db.export import iso_utc, pseudonym, qrels_rows
from db.labels import final_labels, grade
from db.models import Adjudication, Annotator, Judgment, Query, RetrievedItem, Task
from db.report import compute_report
from db.results import load_set, short_read

TABLES = ("labels", "judgments", "adjudications", "queries", "pool")


def _write_parquet(rows: list[dict[str, Any]], columns: list[str], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pydict({c: [r.get(c) for r in rows] for c in columns})
    pq.write_table(table, path)


def _tables(session: Session, set_name: str, salt: str) -> tuple[dict[str, tuple[list[dict], list[str]]], Any]:
    """Every table's rows and columns, and the set's data."""
    data = load_set(session, set_name)
    queries = {q.id: q for q in session.scalars(select(Query).where(Query.id.in_(data.query_ids)))}
    asked = [q.name for q in data.questions]
    finals = final_labels(data)
    relevance = "relevance" in asked
    task_rows = session.execute(select(Task).join(Query, Task.query_id == Query.id)
                                .where(Query.query_set_id == queries[data.query_ids[0]].query_set_id)).scalars().all()
    labels = []
    for t in sorted(task_rows, key=lambda t: (queries[t.query_id].external_id, t.item_id, t.item_b_id)):
        q, f = queries[t.query_id], finals[t.id]
        labels.append({"query_set": data.name, "query_id": q.external_id, "reference_frame": q.reference_id,
                       "edit_text": q.edit_text, "item_id": t.item_id, "item_b_id": t.item_b_id or None,
                       **{n: f.labels.get(n) for n in asked}, "label_source": f.source,
                       "adjudication_reason": data.adjudicated.get(t.id, (None,))[0],
                       "grade": grade(f, relevance) if data.mode == "pointwise" else None,
                       "n_answers": f.n_answers, "gold_identity": t.gold_identity, "gold_edit": t.gold_edit})
    judg = []
    for j, name, t in session.execute(
            select(Judgment, Annotator.name, Task).join(Task, Judgment.task_id == Task.id)
            .join(Annotator, Judgment.annotator_id == Annotator.id).where(Task.id.in_([t.id for t in task_rows]))
            .order_by(Judgment.id)):
        judg.append({"query_id": queries[t.query_id].external_id, "item_id": t.item_id, "item_b_id": t.item_b_id or None,
                     "annotator": pseudonym(name, salt), "status": j.status, **{n: getattr(j, n) for n in asked},
                     "skip_reason": j.skip_reason, "time_spent_ms": j.time_spent_ms,
                     "created_at": iso_utc(j.created_at)})
    adj = []
    for a, name, t in session.execute(
            select(Adjudication, Annotator.name, Task).join(Task, Adjudication.task_id == Task.id)
            .join(Annotator, Adjudication.reviewer_id == Annotator.id).where(Task.id.in_([t.id for t in task_rows]))
            .order_by(Adjudication.id)):
        adj.append({"query_id": queries[t.query_id].external_id, "item_id": t.item_id, "item_b_id": t.item_b_id or None,
                    "reason": a.reason, "reviewer": pseudonym(name, salt), **{n: getattr(a, n) for n in asked},
                    "decided_at": iso_utc(a.updated_at)})
    qrows = [{"query_id": q.external_id, "reference_frame": q.reference_id, "edit_text": q.edit_text,
              "meta": json.dumps({k: v for k, v in (q.meta or {}).items() if k != "auto_identity"}, sort_keys=True)}
             for q in sorted(queries.values(), key=lambda q: q.external_id)]
    pool = [{"query_id": queries[qid].external_id, "method": m, "scoring": sc, "rank": r, "item_id": it,
             "score": score} for qid, m, sc, r, it, score in session.execute(
                 select(RetrievedItem.query_id, RetrievedItem.method, RetrievedItem.scoring, RetrievedItem.rank,
                        RetrievedItem.item_id, RetrievedItem.score).where(RetrievedItem.query_id.in_(list(queries)))
                 .order_by(RetrievedItem.query_id, RetrievedItem.method, RetrievedItem.scoring, RetrievedItem.rank))]
    base = ["query_id", "item_id", "item_b_id"]
    return {
        "labels": (labels, ["query_set", "query_id", "reference_frame", "edit_text", "item_id", "item_b_id", *asked,
                            "label_source", "adjudication_reason", "grade", "n_answers", "gold_identity", "gold_edit"]),
        "judgments": (judg, [*base, "annotator", "status", *asked, "skip_reason", "time_spent_ms", "created_at"]),
        "adjudications": (adj, [*base, "reason", "reviewer", *asked, "decided_at"]),
        "queries": (qrows, ["query_id", "reference_frame", "edit_text", "meta"]),
        "pool": (pool, ["query_id", "method", "scoring", "rank", "item_id", "score"]),
    }, data


def _ci(c: dict | None) -> str:
    if not c or c.get("mean", c.get("value")) is None:
        return "n/a"
    v = c.get("mean", c.get("value"))
    return f"{v:.3f} [{c['lo']:.3f}, {c['hi']:.3f}]" if c.get("lo") is not None else f"{v:.3f}"


def card(report: dict[str, Any], data: Any, counts: dict[str, int], repo: str | None, pool_depth: int | None,
         salt_given: bool) -> str:
    """The dataset card (README.md): YAML front matter for the Hub, then the documentation."""
    configs = "\n".join(f"- config_name: {t}\n  data_files: data/{t}.parquet" + ("\n  default: true" if t == "labels"
                                                                                    else "") for t in TABLES)
    meta = data.meta
    rv = report["review"]
    lines = [f"---\nconfigs:\n{configs}\nlicense: other\npretty_name: {data.name} (CIR annotation campaign)\n"
             "task_categories:\n- image-to-image\n- text-to-image\n---", "",
             f"# {data.name}: human labels for composed image retrieval",
             "", f"Blind, pooled judgments of composed-image-retrieval results, made with the CIR workbench's "
             f"annotation service ({data.mode} questions: {', '.join(report['questions'])}). "
             f"{report['n_queries']} queries, {report['judgments']['tasks']} pairs, "
             f"{report['judgments']['answered']} answers by {report['judgments']['annotators']} annotators "
             f"(overlap {data.overlap}), {rv['adjudicated']} pairs decided by reviewers; "
             f"{rv['open_ties']} open ties.",
             "", "## Loading", "", "```python", "from datasets import load_dataset",
             f"labels = load_dataset(\"{repo or 'ORG/NAME'}\", \"labels\", revision=\"<commit sha>\")"
             "   # pin the commit", "```",
             "", "Frames are named by their ids in the gallery the campaign pooled "
             f"(`{meta.get('gallery', '?')}`): `reference_frame`, `item_id` (and `item_b_id`, candidate B of a "
             "pairwise pair). For MovieNet sets these are the release's keyframe paths.",
             "", "## Tables", "",
             "| table | one row per | columns |", "|---|---|---|",
             "| `labels` | pair | the query (`query_id`, `reference_frame`, `edit_text`), the candidate (`item_id`), the final labels (`label_source`: adjudicated by a reviewer, majority of the "
             "annotators, tie, unjudged), the adjudication reason, the qrels `grade`, answers, gold |",
             "| `judgments` | raw judgment | pseudonymised annotator, status, the answers, skip reason, seconds "
             "(comments are not published) |",
             "| `adjudications` | reviewer decision | reason (disagreement / audit), pseudonymised reviewer, labels |",
             "| `queries` | query | reference frame, edit, the query's meta (film, character) |",
             "| `pool` | retrieved item | method, scoring, rank, item, score: the pooling |",
             "", "## Guidelines (as the annotators read them)", "",
             guidelines.guidelines(data.mode, data.questions), "", "## Agreement", "",
             "| question | Cohen's κ | Fleiss' κ | Krippendorff's α (nominal) | units |", "|---|---|---|---|---|"]
    for q, ag in report["agreement"].items():
        cell = lambda v: "n/a" if v["value"] is None else f"{v['value']:.3f}"  # noqa: E731
        lines.append(f"| {q} | {cell(ag['cohen_kappa'])} | {cell(ag['fleiss_kappa'])} | "
                     f"{cell(ag['krippendorff_alpha'])} | {ag['krippendorff_alpha']['n_units']} |")
    ha = report.get("human_vs_auto")
    if ha and ha["agreement"]["rate"] is not None:
        g = ha["agreement"]
        lines += ["", f"Majority human identity vs the automatic label (cast labels): agreement "
                  f"{g['rate']:.3f} [{g['rate_lo']:.3f}, {g['rate_hi']:.3f}], κ {g['kappa']:.3f} over "
                  f"{g['n_tasks']} pairs."]
    lines += ["", "## Methods", ""]
    if data.mode == "pointwise":
        metrics = list(report["labels"][0]["at_k"]["raw_majority"]) if report.get("labels") else []
        lines += [f"Rates over queries at k = {report['k']} (95 % bootstrap intervals over queries), from the "
                  "raw majority and from the adjudicated labels:", "",
                  "| method · scoring | " + " | ".join(f"{m} (majority) | {m} (adjudicated)" for m in metrics) + " |",
                  "|---|" + "---|" * (2 * len(metrics))]
        for row in report.get("labels", []):
            lines.append(f"| {row['method']} · {row['scoring']} | " + " | ".join(
                f"{_ci(row['at_k']['raw_majority'][m])} | {_ci(row['at_k']['adjudicated'][m])}" for m in metrics) + " |")
    else:
        pw = report["pairwise"]
        lines += ["| X | Y | pairs | X's win rate (answers) | X's win rate (adjudicated) |", "|---|---|---|---|---|"]
        lines += [f"| {p['x']} | {p['y']} | {p['tasks']} | {_ci(p['raw']['win_rate'])} | "
                  f"{_ci(p['adjudicated']['win_rate'])} |" for p in pw["pairs"]]
        if pw.get("bradley_terry"):
            lines += ["", "Bradley–Terry: " + ", ".join(f"{b['rank']}. {b['method']} ({b['log_strength']:+.2f})"
                                                         for b in pw["bradley_terry"])]
    lines += ["", "## Pooling", "",
              f"- methods: {', '.join(meta.get('methods', []))}; scorings: {', '.join(meta.get('scorings', []))}",
              f"- backbone: `{meta.get('backbone', '?')}`; gallery: `{meta.get('gallery', '?')}`",
              f"- depth: top {data.pool_k} of every method × scoring per query"
              + (", pairs at the same rank of every two" if data.mode == "pairwise" else "")
              + f"; overlap {data.overlap}; gold share {meta.get('gold_fraction', 0)}; seed {meta.get('seed', 0)}"
              + f"; audit share of agreed pairs {report.get('audit_share', 0)}",
              f"- answers from paused annotators left out: {report['judgments']['paused_left_out']}",
              f"- review: {rv['adjudicated']} decisions ({rv['by_reason']}); open ties {rv['open_ties']}"]
    if data.mode == "pointwise":
        lines += ["", "## Qrels", "", "`qrels.txt`: `qid 0 docno rel` for every judged pair, graded from the final "
                  "labels: the graded relevance answer where the set asked it, else identity × edit "
                  "(same character and edit satisfied 3, partly 2, not satisfied 1; another character or "
                  "can't tell 0); a tie that no reviewer decided takes the lower grade "
                  f"({counts.get('resolved_low', 0)} here)."
                  + (f" `qrels_pool{pool_depth}.txt` also lists every item pooled at rank ≤ {pool_depth} that "
                     "has no label as -1 (unjudged; trec_eval would count it as judged non-relevant: use the "
                     "plain file there)." if pool_depth else ""),
                  "", "Score any method's rankings on them, judged items only: "
                  "`python -m cir_core.eval.qrels --qrels qrels.txt --rankings rk.jsonl` (R@k lower / "
                  "condensed / upper, nDCG'@k, bpref, and the unjudged share of its top k)."]
    lines += ["", "## Pseudonyms", "", "Annotators and reviewers are named by the first 12 hex digits of "
              "HMAC-SHA256(salt, name), " + ("with the organiser's salt (kept apart from this dataset)."
                                             if salt_given else "with a random salt that was not kept: "
                                             "the pseudonyms link one person's rows and nothing else.")]
    return "\n".join(lines) + "\n"


def build(session: Session, set_name: str, out: Path, salt: str | None = None, pool_depth: int | None = None,
          repo: str | None = None, n_boot: int = 1000) -> dict[str, Any]:
    """Write the dataset folder for `set_name` under `out`; returns what it wrote (table row counts)."""
    with short_read(session):
        tables, data = _tables(session, set_name, salt or secrets.token_hex(32))
        report = compute_report(session, set_name, n_boot=n_boot)
        counts: dict[str, int] = {}
        if data.mode == "pointwise":
            from cir_core.eval.qrels import write_qrels

            rows, counts = qrels_rows(session, set_name)
            write_qrels(rows, out / "qrels.txt")
            if pool_depth:
                write_qrels(qrels_rows(session, set_name, pool_depth)[0], out / f"qrels_pool{pool_depth}.txt")
    for name, (rows, cols) in tables.items():
        _write_parquet(rows, cols, out / "data" / f"{name}.parquet")
    (out / "README.md").write_text(card(report, data, counts, repo, pool_depth, salt is not None), encoding="utf-8")
    return {name: len(rows) for name, (rows, _) in tables.items()}


def publish(db: str, set_name: str, repo: str | None, out: Path | None = None, tag: str | None = None,
            salt: str | None = None, pool_depth: int | None = None, backend: Any = None, n_boot: int = 1000
            ) -> dict[str, Any]:
    """Build the dataset and push it (when `repo`); read it back at the new commit, verified.
    Returns {"rows", "commit", "spec", "folder"}."""
    from db.sqlite import open_db, session_factory

    if not repo and out is None:
        raise InputError("give --repo (push) or --out (a folder), or both")
    engine = open_db(db)
    tmp = tempfile.TemporaryDirectory(prefix="cir-publish-") if out is None else None
    folder = Path(tmp.name) if tmp else Path(out)
    try:
        if folder.exists() and any(folder.iterdir()):
            raise InputError(f"{folder}: not empty; give a new folder")
        folder.mkdir(parents=True, exist_ok=True)
        with session_factory(engine)() as s:
            rows = build(s, set_name, folder, salt, pool_depth, repo, n_boot)
        result: dict[str, Any] = {"rows": rows, "folder": str(folder) if tmp is None else None}
        if repo:
            from cir_core.storage.repo import pull, push

            pushed = push("labels", folder, repo, tag=tag, message=f"db.publish {set_name}", backend=backend)
            got = pull("labels", f"{pushed.ref.repo_id}@{pushed.commit}", backend=backend)
            _check_read_back(Path(got.folder), rows)
            result.update(commit=pushed.commit, spec=f"{pushed.ref.repo_id}@{pushed.commit}", tag=tag,
                          read_back=str(got.folder))
        return result
    finally:
        engine.dispose()
        if tmp:
            tmp.cleanup()


def _check_read_back(folder: Path, rows: dict[str, int]) -> None:
    """Every table at the pushed commit reads back with pyarrow with the rows written."""
    import pyarrow.parquet as pq

    for name, n in rows.items():
        got = pq.read_table(folder / "data" / f"{name}.parquet").num_rows
        if got != n:
            raise CIRError(f"read back {name}: {got} rows, wrote {n}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m db.publish", description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, help="the annotation DB: a SQLite file or a SQLAlchemy URL")
    ap.add_argument("--set", required=True, dest="query_set")
    ap.add_argument("--repo", help="a Hub dataset repo (org/name[@branch]) to push to")
    ap.add_argument("--tag", help="tag the pushed commit (e.g. v1)")
    ap.add_argument("--out", type=Path, help="also keep the dataset folder here (new or empty)")
    ap.add_argument("--local-hub", help="a folder standing in for the Hub (same as CIR_LOCAL_HUB)")
    ap.add_argument("--salt", help="the pseudonyms' secret (or $CIR_PSEUDONYM_SALT; default: a random one, not kept)")
    ap.add_argument("--pool-depth", type=int, help="also write qrels_pool<K>.txt with pooled unjudged items as -1")
    ap.add_argument("--bootstrap", type=int, default=1000)
    a = ap.parse_args(argv)
    if "://" not in a.db and not Path(a.db).is_file():
        ap.error(f"no such database file: {a.db}")
    from cir_core import env
    from cir_core.storage import FolderStore

    backend = FolderStore(a.local_hub, Path(a.local_hub) / ".cache") if a.local_hub else None
    try:
        res = publish(a.db, a.query_set, a.repo, a.out, a.tag, a.salt or env.read("CIR_PSEUDONYM_SALT"),
                      a.pool_depth, backend, a.bootstrap)
    except CIRError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(", ".join(f"{n} {k}" for k, n in res["rows"].items()) + " rows")
    if res.get("spec"):
        print(f"pushed and read back: {res['spec']}" + (f" (tag {res['tag']})" if res.get("tag") else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
