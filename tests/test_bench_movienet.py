"""MovieNet identity set: the manifest loader the annotation pooling calls, and hand-computed
identity@1/5/10 (queries without a character id are ranked but not scored)."""
import pytest

from cir_core.benchmarks import load_benchmark, load_movienet_queryset, movienet
from cir_core.benchmarks.common import BenchmarkError
from cir_core.eval.loop import evaluate
from tests._bench_fixtures import IndexBackbone, write_jsonl, write_movienet

CHARS = [["A"], ["A", "B"], ["B"], [], ["C"], ["A"], ["C", "D"], ["D"], [], [], [], []]
FRAMES = [(f"frames/tt0{1 + i // 4}/shot_{i:04d}_img_1.jpg", f"tt0{1 + i // 4}", c) for i, c in enumerate(CHARS)]


def _f(i):
    return FRAMES[i][0]


@pytest.fixture
def mn_root(tmp_path):
    return write_movienet(tmp_path / "movienet", FRAMES, [
        # f2 [B], f3 [], f1 [A] -> first A at rank 2
        {"query_id": "q1", "reference_frame": _f(0), "edit": "w:2=0.9,3=0.8,1=0.7", "film_id": "tt01", "character_id": "A"},
        {"query_id": "q2", "reference_frame": _f(4), "edit": "w:6=1", "film_id": "tt02", "character_id": "C"},
        # f5 [A], f2 [B], then zero rows f0 f1 f3 f4 f6 -> first D (f6) at rank 6
        {"query_id": "q3", "reference_frame": _f(7), "edit": "w:5=1,2=0.5", "film_id": "tt02", "character_id": "D"},
        {"query_id": "q4", "reference_frame": _f(3), "edit": "w:1=1", "film_id": "tt01", "character_id": None},
    ])


def test_identity_hand_computed(mn_root, tmp_path):
    bench = load_benchmark("movienet", mn_root)
    rep, raw = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    m = rep["results"]["text-only"]["cosine"]
    assert m["identity@n"] == 3 and m["identity@1"] == pytest.approx(1 / 3, abs=1e-4)
    assert m["identity@5"] == pytest.approx(2 / 3, abs=1e-4) and m["identity@10"] == 1.0
    assert raw[("text-only", "cosine")].top["q4"][0] == _f(1)  # ranked though not scored


def test_queryset_for_annotation(mn_root):
    queries, gallery = load_movienet_queryset(mn_root)
    assert queries[0] == {"external_id": "q1", "reference_id": _f(0), "edit_text": "w:2=0.9,3=0.8,1=0.7",
                          "meta": {"film_id": "tt01", "character_id": "A"}}
    assert queries[3]["meta"]["character_id"] is None
    assert gallery.items[gallery.index_of(_f(1))].meta == {"film_id": "tt01", "character_ids": ["A", "B"]}
    assert gallery.items[1].path.endswith(_f(1))


def test_bad_manifest_names_the_line(mn_root):
    write_jsonl(mn_root / "queries.jsonl", [{"query_id": 1, "reference_frame": "frames/none.jpg",
                                             "edit": "x", "film_id": "tt01", "character_id": "A"}])
    with pytest.raises(BenchmarkError, match=r"queries\.jsonl line 1: reference_frame 'frames/none.jpg'"):
        movienet.load(mn_root)
    write_jsonl(mn_root / "gallery.jsonl", [{"frame": _f(0), "film_id": "tt01", "character_ids": "A"}])
    with pytest.raises(BenchmarkError, match=r"gallery\.jsonl line 1: key 'character_ids' should be list"):
        movienet.load(mn_root)
    with pytest.raises(BenchmarkError, match="one split"):
        movienet.load(mn_root, "test")
