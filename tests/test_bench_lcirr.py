"""L-CIRR evaluator on a tiny CIRR-format fixture plus the lcirr/{split}.jsonl manifest:
hand-computed recalls, CIRR's subsets when the pairs are CIRR's, and both progression protocols."""
import json

import pytest

from cir_core.benchmarks import lcirr, load_benchmark
from cir_core.benchmarks.common import BenchmarkError
from cir_core.eval.loop import evaluate
from tests._bench_fixtures import IndexBackbone, cirr_query, write_cirr, write_jsonl

N = [f"dev-{i}-1-img1" for i in range(12)]


@pytest.fixture
def lcirr_root(tmp_path):
    # CIRR's own pairs: the subsets (img_set members) come from its captions file
    root = write_cirr(tmp_path / "cirr", "val", N, [
        cirr_query(11, N[0], N[11], "a", [N[0], N[11], N[7], N[3], N[4], N[5]]),
        cirr_query(12, N[1], N[2], "b", [N[1], N[2], N[3], N[4], N[5], N[6]])])
    write_jsonl(root / "lcirr" / "val.jsonl", [
        # after s1 only n7 scores: n7 n1 .. n6 n8 n9 n10 n11 -> target n11 at rank 10 (a miss);
        # after s2 n7 (3) n11 (2) -> rank 1; after s3 n11 (4) leads -> rank 0
        {"pairid": 11, "reference": N[0], "target": N[11], "text": "Make it w:7=3. Add w:11=2. Also w:11=2."},
        # one sentence: n9 leads the gallery (R@1 misses) but is not in the subset (Rs@1 hits)
        {"pairid": 12, "reference": N[1], "target": N[2], "text": "w:9=2 w:2=1"},
    ])
    return root


def test_recall_and_progression_hand_computed(lcirr_root, tmp_path):
    bench = load_benchmark("lcirr", lcirr_root, "val")
    assert bench.sentences[0] == ["Make it w:7=3.", "Add w:11=2.", "Also w:11=2."]
    rep, raw = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    assert rep["results"]["text-only"]["cosine"] == {"R@1": 0.5, "R@5": 1.0, "R@10": 1.0,
                                                    "Rs@1": 1.0, "Rs@2": 1.0, "Rs@3": 1.0}
    assert "Rs@K over CIRR's img_set" in rep["protocol"] and "prefix" in rep["protocol"]
    extra = rep["extra"]["text-only"]["cosine"]
    assert extra["multi_sentence_share"] == 0.5
    prefix = extra["progression"]["prefix"]  # the multi-sentence query alone: ranks 10, 1, 0
    assert {k: prefix[k] for k in ("R@10 sentences 1-1", "R@10 sentences 1-2", "R@10 sentences 1-3")} == \
        {"R@10 sentences 1-1": 0.0, "R@10 sentences 1-2": 1.0, "R@10 sentences 1-3": 1.0}
    assert prefix["queries"] == 1 and prefix["median_rank_first"] == 10 and prefix["median_rank_last"] == 0
    assert prefix["step_improved_or_held"] == 1.0 and prefix["rank_improved"] == 1.0
    assert "states" not in extra["progression"]  # text-only has no step states of its own
    assert raw[("text-only", "cosine")].top["11"][:2] == [N[11], N[7]]
    assert raw[("text-only", "cosine")].top["12"][:2] == [N[9], N[2]]
    rep, _ = evaluate(bench, IndexBackbone(), ["sum"], ("chord",), cache=tmp_path / "c", progress=False)
    assert "R@10 sentences 1-3" in rep["extra"]["sum"]["chord"]["progression"]["prefix"]


def test_pairs_that_are_not_cirrs_get_no_subsets(lcirr_root, tmp_path):
    path = lcirr_root / "captions" / "cap.rc2.val.json"
    caps = json.loads(path.read_text())
    caps[1]["reference"] = N[5]  # pairid 12 now names another reference in CIRR
    path.write_text(json.dumps(caps))
    bench = lcirr.load(lcirr_root)
    assert bench.members is None and "1 of 2 pairids are not CIRR's" in bench.protocol
    rep, _ = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    assert set(rep["results"]["text-only"]["cosine"]) == {"R@1", "R@5", "R@10"}
    path.write_text("[]")  # an unusable CIRR file costs the subsets, not the evaluation
    assert lcirr.load(lcirr_root).members is None


def test_bad_manifest_names_the_line(lcirr_root):
    path = lcirr_root / "lcirr" / "val.jsonl"
    write_jsonl(path, [{"pairid": 1, "reference": N[0], "target": "dev-99", "text": "a b."}])
    with pytest.raises(BenchmarkError, match=r"val\.jsonl query 1: target 'dev-99' is not in"):
        lcirr.load(lcirr_root)
    write_jsonl(path, [{"pairid": 1, "reference": N[0], "target": N[1]}])
    with pytest.raises(BenchmarkError, match="query 1: missing key 'text'"):
        lcirr.load(lcirr_root)
    path.write_text('{"pairid": 1,\n')
    with pytest.raises(BenchmarkError, match="line 1: not valid JSON"):
        lcirr.load(lcirr_root)
