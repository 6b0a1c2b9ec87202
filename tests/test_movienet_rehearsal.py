"""The MovieNet campaign rehearsed end to end, small: the film world exported in MovieNet's
release layout → the set builder (identity-200 shape, scaled) with edits from the ITT rules →
pooling → simulated annotators with known error rates (overlap 2, gold) through the real
annotation service → a simulated reviewer adjudicates the disagreements and an audit share (0
open ties) → db.report, whose intervals must hold the simulated truth, and its
automatic-vs-human table → the labels published as a Hugging Face dataset to a folder remote,
read back pinned → a method left out of the pool scored on the published qrels. The full run is
training/rehearse_movienet.sh (docs/ANNOTATION.md)."""
from __future__ import annotations

import json

import numpy as np

from cir_core.benchmarks import load_movienet_queryset
from cir_core.benchmarks.movienet.build import PRESETS, build_set, scaled
from cir_core.benchmarks.movienet.edits import read_edits
from cir_core.engine import load_engine
from cir_core.settings import EngineConfig
from cir_core.world.export import export
from db.campaign_figures import THUMB, campaign_panels
from db.campaign_figures import main as campaign_figures
from db.migrate import init_db
from db.pooling import movienet_queries, pool_query_set
from db.report import format_report
from db.simulate import format_checks, simulate
from db.sqlite import open_db, session_factory
from training.build_itt import main as build_itt

METHODS = ["sum", "text-only", "image-only"]


def test_a_simulated_campaign_is_recovered_by_the_report(tmp_path, capsys):
    rel = tmp_path / "release"
    export("movienet-release", "val", rel, n_queries=4, image_size=64, n_films=5)
    out = tmp_path / "set"
    preset = scaled(PRESETS["identity-200"], n_queries=30, n_references=30, n_ref_films=4, n_gallery=240,
                    n_gallery_films=5)
    build_set(rel, out, preset)
    assert build_itt(["--manifest", str(out / "references.jsonl"), "--out", str(out / "itt.jsonl"),
                      "--types", "scene", "--quiet"]) == 0
    build_set(rel, out, preset, edits=read_edits(out / "itt.jsonl"))
    cfg = EngineConfig(gallery=f"movienet:{out}", backbone="cir-tiny-vit", methods=tuple(METHODS),
                       cache_dir=str(tmp_path / "cache"))
    engine = load_engine(cfg, progress_cb=None)
    db_path = tmp_path / "ann.sqlite"
    db = open_db(db_path)
    init_db(db)
    with session_factory(db)() as s:
        raw, gallery = load_movienet_queryset(out)
        pool_query_set(s, engine, "mn", movienet_queries(engine, raw), METHODS, ["cosine", "chord"], k=3,
                       overlap=2, gold_fraction=0.15, seed=1, audit_share=0.1)
    db.dispose()
    report, res = simulate(db_path, "mn", [0.05, 0.15, 0.3], seed=2, n_boot=500, reviewer_error=0.05)
    text = format_report(report) + "\n" + format_checks(res)
    ha = report["human_vs_auto"]
    assert ha and len(ha["methods"]) == len(METHODS) * 2 and ha["agreement"]["n_tasks"] > 0
    assert all(m["at_k"]["queries"] == 30 for m in ha["methods"])  # every query judged and labelled
    assert 0 < ha["agreement"]["kappa"] < 1  # annotators err, so people and labels disagree somewhat
    golds = [c for c in res["checks"] if c["check"].startswith("gold accuracy")]
    assert len(golds) == 3 and res["total"] == 3 + len(METHODS) * 2 * 2 + 1 + 2
    rv = report["review"]
    assert rv["open_ties"] == 0 and rv["by_reason"]["disagreement"] > 0 and rv["by_reason"].get("audit", 0) > 0
    assert next(c for c in res["checks"] if c["check"] == "open ties after review")["ok"]
    assert all(set(r["at_k"]) == {"raw_majority", "adjudicated"} for r in report["labels"])
    assert res["held"] >= 0.8 * res["total"], text
    assert "human vs automatic" in text
    json.dumps(report, allow_nan=False)  # the report's JSON has no NaN
    # Figs. 7-11 style, from this campaign: the two methods' disagreements first
    figs = [tmp_path / "fig.png", tmp_path / "fig.pdf"]
    assert campaign_figures(["--db", str(db_path), "--set", "mn", "--root", str(out), "--methods", "sum",
                             "text-only", "image-only", "--n", "3"] + [x for f in figs for x in ("--out", str(f))]) == 0
    assert all(f.stat().st_size > 1000 for f in figs) and figs[1].read_bytes()[:5] == b"%PDF-"
    engine_db = open_db(db_path)
    with session_factory(engine_db)() as s:
        panels = campaign_panels(s, "mn", out, ["sum", "text-only"], n=3)
    engine_db.dispose()
    assert len(panels) == 3
    plain = {np.asarray(gallery.load_image(i, THUMB)).tobytes() for i in range(len(gallery))}
    assert all(np.asarray(p.reference).tobytes() not in plain for p in panels)  # the character's box drawn
    assert all(np.asarray(c.image).tobytes() in plain for p in panels for _, cells in p.rows for c in cells)
    assert any(c.failed for p in panels for _, cells in p.rows for c in cells)  # failures are marked
    _publish_and_score_a_left_out_method(tmp_path, db_path, out, report)


def _publish_and_score_a_left_out_method(tmp_path, db_path, out, report):
    """The rehearsal's last steps: publish to a folder remote, pull at the tag, score 'pact' (never
    pooled) and 'sum' (pooled) on the published qrels."""
    import pyarrow.parquet as pq

    from cir_core.eval.cli import main as evaluate
    from cir_core.eval.qrels import main as score
    from cir_core.eval.qrels import read_qrels
    from cir_core.hub.__main__ import main as hub
    from db.publish import main as publish

    hub_dir = tmp_path / "hub"
    assert publish(["--db", str(db_path), "--set", "mn", "--repo", "local/mn-labels", "--tag", "v1",
                    "--local-hub", str(hub_dir), "--pool-depth", "3", "--bootstrap", "200"]) == 0
    pulled = tmp_path / "pulled"
    assert hub(["pull", "labels", "local/mn-labels@v1", "--local-hub", str(hub_dir), "--out", str(pulled)]) == 0
    labels = pq.read_table(pulled / "data" / "labels.parquet").to_pylist()
    judgments = pq.read_table(pulled / "data" / "judgments.parquet").to_pylist()
    assert len(labels) == report["judgments"]["tasks"] and {r["label_source"] for r in labels} <= {"adjudicated",
                                                                                                   "majority"}
    assert len(judgments) == report["judgments"]["answered"] + report["judgments"]["skipped"]
    assert not any("sim-" in (r["annotator"] or "") for r in judgments)  # pseudonymised
    assert "## Agreement" in (pulled / "README.md").read_text() and "## Pooling" in (pulled / "README.md").read_text()
    try:
        import datasets
    except ImportError:
        datasets = None
    if datasets is not None:  # the Hub's own reader, offline on the pulled files
        ds = datasets.load_dataset("parquet", data_files={"labels": str(pulled / "data" / "labels.parquet")})
        assert ds["labels"].num_rows == len(labels)
    qrels = read_qrels(pulled / "qrels_pool3.txt")
    assert sum(len(v) for v in qrels.values()) == len(labels)  # every pair graded (no open tie left)
    rk = tmp_path / "rankings.jsonl"
    assert evaluate(["--benchmark", "movienet", "--root", str(out), "--backbone", "cir-tiny-vit", "--methods",
                     "pact", "sum", "--scoring", "cosine", "--dump-rankings", str(rk),
                     "--cache-dir", str(tmp_path / "cache")]) == 0
    js, fig = tmp_path / "scores.json", tmp_path / "unjudged.png"
    assert score(["--qrels", str(pulled / "qrels_pool3.txt"), "--rankings", str(rk), "--k", "1,3,10",
                  "--json", str(js), "--plot", str(fig), "--bootstrap", "200"]) == 0
    by = {r["method"]: r["metrics"] for r in json.loads(js.read_text())["results"]}
    assert by["sum"]["unjudged@3"]["mean"] == 0.0  # pooled at depth 3: every one of its top 3 judged
    assert by["pact"]["unjudged@3"]["mean"] > 0  # never pooled: some of its top 3 have no label
    for m in by.values():
        assert m["R@3_lower"]["mean"] <= m["R@3_condensed"]["mean"] <= m["R@3_upper"]["mean"]
    assert fig.stat().st_size > 5000
