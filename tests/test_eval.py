"""The evaluation CLI end to end on a small benchmark (random-weight tiny backbone)."""
import json

import numpy as np

from cir_core.benchmarks.world import WorldEval
from cir_core.eval import cli as ev
from cir_core.eval.loop import evaluate
from cir_core.search import ScoreOpts

METRICS = ["R@1", "R@5", "R@10", "R@50", "Rs@1", "Rs@2", "Rs@3", "mAP@5", "mAP@10", "mAP@25", "mAP@50",
           "identity@1", "edit@1"]


def world(bench, progression=False):
    return WorldEval(bench, 64, progression)


def test_evaluate_schema_and_dump(tiny_backbone, small_bench, tmp_path):
    dump = tmp_path / "rk.jsonl"
    with open(dump, "w") as f:
        rep, _ = evaluate(world(small_bench), tiny_backbone, ["text-only", "image-only", "sum"],
                          cache=tmp_path / "cache", dump=f, progress=False)
    assert rep["split"] == "test"
    assert set(rep["results"]) == {"text-only", "image-only", "sum"}
    for by in rep["results"].values():
        assert set(by) == {"cosine", "chord"}
        for m in by.values():
            assert list(m) == METRICS
            assert all(0.0 <= v <= 1.0 for v in m.values())
    lines = [json.loads(x) for x in dump.read_text().splitlines()]
    assert len(lines) == 3 * 2 * len(small_bench.queries)
    row = lines[0]
    assert set(row) == {"benchmark", "method", "scoring", "query_id", "reference_id", "top", "target_id", "gt_ids"}
    assert row["reference_id"] not in row["top"] and len(row["top"]) == 50
    assert row["target_id"] in row["gt_ids"]
    # image-only has q - q_empty = 0, so Chord must equal cosine exactly
    assert rep["results"]["image-only"]["chord"] == rep["results"]["image-only"]["cosine"]


def test_metrics_match_bruteforce(tiny_backbone, small_bench, tmp_path):
    """R@K and identity@1 recomputed naively from the dumped rankings."""
    dump = tmp_path / "rk.jsonl"
    with open(dump, "w") as f:
        rep, _ = evaluate(world(small_bench), tiny_backbone, ["sum"], scorings=("cosine",),
                          cache=tmp_path / "cache", dump=f, progress=False)
    rows = [json.loads(x) for x in dump.read_text().splitlines()]
    r10 = np.mean([r["target_id"] in r["top"][:10] for r in rows])
    assert abs(rep["results"]["sum"]["cosine"]["R@10"] - r10) < 1e-4
    ident = {it.item_id: it.scene.character.identity for it in small_bench.items}
    id1 = np.mean([ident[r["top"][0]] == ident[r["reference_id"]] for r in rows])
    assert abs(rep["results"]["sum"]["cosine"]["identity@1"] - id1) < 1e-4


def test_cli_errors_are_one_line(capsys):
    assert ev.main(["--methods", "nope", "--backbone", "cir-tiny-vit"]) == 2
    err = capsys.readouterr().err
    assert "unknown method" in err and "Traceback" not in err
    assert ev.main(["--backbone", "local-dir:/no/such/dir"]) == 2
    assert "error:" in capsys.readouterr().err


def test_cli_writes_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CIR_CACHE_DIR", str(tmp_path / "c"))
    out = tmp_path / "r.json"
    assert ev.main(["--backbone", "cir-tiny-vit", "--n-queries", "12", "--methods", "sum",
                    "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["results"]["sum"]["chord"]["R@50"] >= rep["results"]["sum"]["chord"]["R@1"]
    assert "sum" in capsys.readouterr().out


def test_progression_report(tiny_backbone, small_bench, tmp_path):
    rep, raw = evaluate(world(small_bench, progression=True), tiny_backbone, ["sum"], scorings=("cosine",),
                        cache=tmp_path / "cache", progress=False)
    res = raw["sum", "cosine"]  # per-query outcomes average to the reported metrics
    for key, v in res.aux["per_query"].items():
        assert round(float(v.mean()), 4) == rep["results"]["sum"]["cosine"][key]
    ranks, n = res.aux["progression_ranks"]["prefix"]
    assert ranks.shape == (len(n), n.max())
    prog = rep["extra"]["sum"]["cosine"]["progression"]
    assert set(prog) == {"prefix"}  # the sum baseline has no step states of its own
    p = prog["prefix"]
    n_multi = sum(len(q.sentences) > 1 for q in small_bench.queries)
    assert p["queries"] == n_multi > 0
    assert 0 <= p["rank_improved"] <= p["rank_improved_or_held"] <= 1
    assert 0 <= p["every_step_improved_or_held"] <= p["step_improved_or_held"] <= 1


def test_cli_checkpoint_flag_is_validated(capsys):
    assert ev.main(["--backbone", "cir-tiny-vit", "--checkpoint", "pact"]) == 2
    assert "METHOD=DIR" in capsys.readouterr().err


def test_cli_creates_output_folders_before_loading_anything(tmp_path, monkeypatch):
    monkeypatch.setenv("CIR_CACHE_DIR", str(tmp_path / "c"))
    dump = tmp_path / "new" / "deeper" / "rk.jsonl"
    assert ev.main(["--backbone", "cir-tiny-vit", "--n-queries", "6", "--methods", "sum", "--scoring", "cosine",
                    "--dump-rankings", str(dump)]) == 0
    assert dump.is_file() and len(dump.read_text().splitlines()) == 6
    (tmp_path / "file").write_text("x")
    assert ev.main(["--backbone", "local-dir:/never/loaded", "--dump-rankings", str(tmp_path / "file" / "rk.jsonl")]) == 2


def test_a_native_progression_is_reported_under_both_protocols(tiny_backbone, small_bench, tmp_path):
    """PACE-like states (q0 from the whole text) and the prefix protocol (q0 from sentences 1..k)
    differ at the first step and agree at the last."""
    from _cir_fakes import FakePACE, fake_trained_methods

    with fake_trained_methods():
        bench = world(small_bench, progression=True)
        from cir_core.eval.loop import embed_benchmark, score_method

        data = embed_benchmark(bench, tiny_backbone, tmp_path / "cache", False)
        g = data.emb["gallery"]
        m = FakePACE(tiny_backbone)
        rep = score_method(bench, m, data, [ScoreOpts()])[0][0].extra["progression"]
    assert set(rep) == {"prefix", "states"}
    assert rep["prefix"]["queries"] == rep["states"]["queries"] > 0
    q = next(q for q in small_bench.queries if len(q.sentences) > 1)
    ref = g[small_bench.reference_idx[small_bench.queries.index(q)]]
    prefix, states = m.prefix_queries(ref, list(q.sentences)), m.progression(ref, list(q.sentences))
    assert not np.allclose(prefix[0], states[0])  # states' q0 saw every sentence


def test_text_overflow_counts_texts_beyond_the_context_and_is_printed():
    from types import SimpleNamespace

    from cir_core.eval.loop import format_table, text_overflow

    bb = SimpleNamespace(context_length=8, token_count=lambda t: len(t.split()) + 2)
    bench = SimpleNamespace(query_texts=lambda: ["a b", "a b c d e f g", "a b c d e f g h i j"])
    tc = text_overflow(bench, bb)
    assert tc == {"context": 8, "over": 2, "of": 3, "longest": 12}
    assert text_overflow(SimpleNamespace(), bb) is None  # a benchmark that lists no texts
    report = {"benchmark": "x", "split": "test", "n_queries": 3, "gallery_size": {"g": 5}, "backbone": "b",
              "labelled": True, "results": {}, "text_context": tc}
    assert "2 of 3 query texts are longer than the text tower's 8 tokens (longest 12)" in format_table(report)
