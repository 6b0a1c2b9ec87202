"""The MovieNet campaign rehearsed end to end, small: the film world exported in MovieNet's
release layout → the set builder (identity-200 shape, scaled) with edits from the ITT rules →
pooling → simulated annotators with known error rates (overlap 2, gold) through the real
annotation service → db.report, whose intervals must hold the simulated truth, and its
automatic-vs-human table. The full run is training/rehearse_movienet.sh (docs/ANNOTATION.md)."""
from __future__ import annotations

import json

import numpy as np

from cir_core.benchmarks import load_movienet_queryset
from cir_core.benchmarks.movienet.build import PRESETS, build_set, scaled
from cir_core.benchmarks.movienet.edits import read_edits
from cir_core.engine import load_engine
from cir_core.settings import EngineConfig
from cir_core.world.export import export
from db.campaign_figures import THUMB, campaign_panels, main as campaign_figures
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
                       overlap=2, gold_fraction=0.15, seed=1)
    db.dispose()
    report, res = simulate(db_path, "mn", [0.05, 0.15, 0.3], seed=2, n_boot=500)
    text = format_report(report) + "\n" + format_checks(res)
    ha = report["human_vs_auto"]
    assert ha and len(ha["methods"]) == len(METHODS) * 2 and ha["agreement"]["n_tasks"] > 0
    assert all(m["at_k"]["queries"] == 30 for m in ha["methods"])  # every query judged and labelled
    assert 0 < ha["agreement"]["kappa"] < 1  # annotators err, so people and labels disagree somewhat
    golds = [c for c in res["checks"] if c["check"].startswith("gold accuracy")]
    assert len(golds) == 3 and res["total"] == 3 + len(METHODS) * 2 * 2 + 1
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
