"""CIRCO evaluator on tiny official-format fixtures: hand-computed mAP@K under both named
protocols (keep-reference, the authors' code and the default; remove-reference), the semantic
mAP@10 breakdown, the server file, bad input."""
import json

import pytest

from cir_core.benchmarks import circo, load_benchmark
from cir_core.benchmarks.common import BenchmarkError
from cir_core.eval.loop import evaluate
from tests._bench_fixtures import IndexBackbone, write_circo

IDS = [9761, 85932, 489535, 57541, 375057, 119881, 100, 200, 300, 400, 500, 600]  # colour = position


def _val():
    w = lambda d: ",".join(f"{k}={v}" for k, v in d.items())  # noqa: E731
    return [
        # ranking without the ref (pos 1): pos 2, 5, 0, 6, 3, then 4, 7, ... ; GT {0, 2, 3}
        {"id": 0, "reference_img_id": IDS[1], "target_img_id": IDS[0], "gt_img_ids": [IDS[0], IDS[2], IDS[3]],
         "relative_caption": "w:" + w({1: 1.0, 2: 0.9, 5: 0.8, 0: 0.7, 6: 0.6, 3: 0.5}),
         "shared_concept": "a teddy bear", "semantic_aspects": ["cardinality", "addition"]},
        # ranking: pos 9, 8, 7, 6, 5, 4 -> the only GT (pos 4) is 6th
        {"id": 1, "reference_img_id": IDS[0], "target_img_id": IDS[4], "gt_img_ids": [IDS[4]],
         "relative_caption": "w:" + w({4: 0.3, 9: 0.9, 8: 0.8, 7: 0.7, 6: 0.6, 5: 0.5}),
         "shared_concept": "a dog", "semantic_aspects": ["addition"]},
    ]


def test_val_map_keep_reference_is_the_default(tmp_path, capsys):
    """The authors' code (SEARLE validate.py) ranks the whole gallery, the reference included."""
    root = write_circo(tmp_path / "circo", IDS, {"val": _val()})
    bench = load_benchmark("circo", root, "val")
    assert bench.protocol.startswith("keep-reference")
    rep, raw = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    m = raw[("text-only", "cosine")].metrics
    # query 0: the reference (pos 1) first, then 2, 5, 0, 6, 3: GT {0, 2, 3} at ranks 2, 4, 6
    ap0_5, ap0_10 = (1 / 2 + 2 / 4) / 3, (1 / 2 + 2 / 4 + 3 / 6) / 3
    assert m["mAP@5"] == pytest.approx((ap0_5 + 0) / 2)
    assert m["mAP@10"] == pytest.approx((ap0_10 + 1 / 6) / 2)  # query 1: P(6) = 1/6, |GT| = 1
    assert m["R@5"] == 0.5 and m["R@10"] == 1.0
    assert "mAP@25" not in m  # only 12 images
    assert raw[("text-only", "cosine")].top["0"][:3] == [IDS[1], IDS[2], IDS[5]]
    sem = rep["extra"]["text-only"]["cosine"]["semantic mAP@10"]
    assert sem == {"addition": pytest.approx((ap0_10 + 1 / 6) / 2, abs=1e-4), "cardinality": pytest.approx(ap0_10, abs=1e-4)}
    from cir_core.eval.loop import format_table
    assert "protocol: keep-reference" in format_table(rep)
    assert rep["protocol"] == bench.protocol + "; images: the backbone's own preprocessing (resize, centre crop)"


def test_val_map_remove_reference(tmp_path):
    root = write_circo(tmp_path / "circo", IDS, {"val": _val()})
    bench = load_benchmark("circo", root, "val", protocol="remove-reference")
    assert bench.protocol.startswith("remove-reference")
    _, raw = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    m = raw[("text-only", "cosine")].metrics
    ap0 = (1 + 2 / 3 + 3 / 5) / 3  # hits at ranks 1, 3, 5 of 3 GTs
    assert m["mAP@5"] == pytest.approx((ap0 + 0) / 2)
    assert m["mAP@10"] == pytest.approx((ap0 + 1 / 6) / 2)  # query 1: P(6) = 1/6, |GT| = 1
    assert m["R@5"] == 0.5 and m["R@10"] == 1.0
    assert "mAP@25" not in m  # only 11 rankable images
    assert raw[("text-only", "cosine")].top["0"][:3] == [IDS[2], IDS[5], IDS[0]]
    with pytest.raises(BenchmarkError, match="CIRCO --protocol must be one of keep-reference, remove-reference"):
        load_benchmark("circo", root, "val", protocol="nope")
    with pytest.raises(BenchmarkError, match="circo has no option --subset"):
        load_benchmark("circo", root, "val", subset="dress")


def test_gallery_from_folder_without_info_file(tmp_path):
    root = write_circo(tmp_path / "circo", IDS, {"val": _val()}, info_file=False)
    bench = circo.load(root, "val")
    assert sorted(int(i) for i in bench.gallery.ids) == sorted(IDS)
    rep, _ = evaluate(bench, IndexBackbone(), ["text-only"], ("chord",), cache=tmp_path / "c", progress=False)
    assert 0 <= rep["results"]["text-only"]["chord"]["mAP@10"] <= 1


def test_test_submission(tmp_path):
    ids = [1000 + 7 * i for i in range(56)]
    test = [{"id": 0, "reference_img_id": ids[3], "relative_caption": "w:3=1,10=0.9,20=0.8", "shared_concept": "x"},
            {"id": 1, "reference_img_id": ids[5], "relative_caption": "w:0=0.2", "shared_concept": "y"}]
    root = write_circo(tmp_path / "circo", ids, {"test": test})
    bench = load_benchmark("circo", root, "test")
    assert not bench.labelled
    rep, raw = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    assert rep["results"]["text-only"]["cosine"] == {}
    out = bench.write_submission(raw[("text-only", "cosine")], tmp_path / "circo_test.json")[0]
    sub = json.loads(out.read_text())
    assert set(sub) == {"0", "1"} and all(len(v) == 50 and isinstance(v[0], int) for v in sub.values())
    # keep-reference (default): the reference (weight 1) is listed first, as the authors' code does
    assert sub["0"][:3] == [ids[3], ids[10], ids[20]] and sub["1"][0] == ids[0]
    gal = set(ids)
    with pytest.raises(BenchmarkError, match="missing"):
        circo.validate_submission({"0": sub["0"]}, ["0", "1"], [ids[3], ids[5]], gal)
    with pytest.raises(BenchmarkError, match="50 distinct integer"):
        circo.validate_submission({**sub, "1": [str(x) for x in sub["1"]]}, ["0", "1"], [ids[3], ids[5]], gal)
    with pytest.raises(BenchmarkError, match="own reference"):
        circo.validate_submission(sub, ["0", "1"], [ids[3], ids[5]], gal, allow_reference=False)
    bench = load_benchmark("circo", root, "test", protocol="remove-reference")
    _, raw = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    sub = json.loads(bench.write_submission(raw[("text-only", "cosine")], tmp_path / "rm.json")[0].read_text())
    assert sub["0"][:2] == [ids[10], ids[20]] and ids[3] not in sub["0"]


def test_bad_annotations_name_the_culprit(tmp_path):
    bad = _val()
    bad[1]["gt_img_ids"] = [123456]
    root = write_circo(tmp_path / "circo", IDS, {"val": bad})
    with pytest.raises(BenchmarkError, match=r"val\.json entry 1 gt_img_ids: image 123456 is not in"):
        circo.load(root, "val")
    bad = _val()
    bad[1]["id"] = 5
    (root / "annotations" / "val.json").write_text(json.dumps(bad))
    with pytest.raises(BenchmarkError, match="query ids must be 0..1"):
        circo.load(root, "val")
    del bad[0]["relative_caption"]
    (root / "annotations" / "val.json").write_text(json.dumps(bad))
    with pytest.raises(BenchmarkError, match="entry 0: missing key 'relative_caption'"):
        circo.load(root, "val")
    with pytest.raises(BenchmarkError, match="splits"):
        circo.load(root, "train")
