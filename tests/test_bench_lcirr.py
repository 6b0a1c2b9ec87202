"""L-CIRR evaluator on a tiny CIRR-format fixture plus the lcirr/{split}.jsonl manifest:
hand-computed recalls and R@10 after each sentence prefix."""
import pytest

from cir_core.benchmarks import lcirr, load_benchmark
from cir_core.evaluation import evaluate
from cir_core.benchmarks.common import BenchmarkError
from tests._bench_fixtures import IndexBackbone, write_cirr, write_jsonl

N = [f"dev-{i}-1-img1" for i in range(12)]


@pytest.fixture
def lcirr_root(tmp_path):
    root = write_cirr(tmp_path / "cirr", "val", N, [])
    write_jsonl(root / "lcirr" / "val.jsonl", [
        # after s1 only n7 scores: n7 n1 .. n6 n8 n9 n10 n11 -> target n11 at rank 10 (a miss);
        # after s2 n7 (3) n11 (2) -> rank 1; after s3 n11 (4) leads -> rank 0
        {"pairid": 11, "reference": N[0], "target": N[11], "text": "Make it w:7=3. Add w:11=2. Also w:11=2."},
        {"pairid": 12, "reference": N[1], "target": N[2], "text": "w:2=1"},  # rank 0 throughout
    ])
    return root


def test_recall_and_progression_hand_computed(lcirr_root, tmp_path):
    bench = load_benchmark("lcirr", lcirr_root, "val")
    assert bench.sentences[0] == ["Make it w:7=3.", "Add w:11=2.", "Also w:11=2."]
    rep, raw = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    assert rep["results"]["text-only"]["cosine"] == {"R@1": 1.0, "R@5": 1.0, "R@10": 1.0}
    prog = rep["extra"]["text-only"]["cosine"]["progression"]
    assert prog == {"R@10 sentences 1-1": 0.5, "R@10 sentences 1-2": 1.0, "R@10 sentences 1-3": 1.0,
                    "share multi-sentence": 0.5}
    assert raw[("text-only", "cosine")].top["11"][:2] == [N[11], N[7]]
    rep, _ = evaluate(bench, IndexBackbone(), ["sum"], ("chord",), cache=tmp_path / "c", progress=False)
    assert "R@10 sentences 1-3" in rep["extra"]["sum"]["chord"]["progression"]


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
