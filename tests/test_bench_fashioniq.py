"""FashionIQ evaluator on tiny official-format fixtures: the two named text protocols (clip4cir,
the default; both-orders, SEARLE's), hand-computed R@10/R@50 per category and their mean, image
extensions, the start kit's folder, a subset of categories."""
import json

import numpy as np
import pytest

from cir_core.benchmarks import fashioniq, load_benchmark
from cir_core.benchmarks.common import BenchmarkError, compose_queries
from cir_core.eval.loop import evaluate
from cir_core.methods.base import Method
from tests._bench_fixtures import IndexBackbone, write_fashioniq, write_image

D = [f"B00D{i:04d}" for i in range(52)]
S = [f"B00S{i:04d}" for i in range(52)]
T = [f"B00T{i:04d}" for i in range(52)]


def _trip(cand, target, c1, c2):
    return {"candidate": cand, "target": target, "captions": [c1, c2]}


@pytest.fixture
def fiq_root(tmp_path):
    root = tmp_path / "fashionIQ"
    write_fashioniq(root, "dress", D, [
        _trip(D[0], D[5], "w:0=1.0", "w:5=0.9"),  # the reference stays in the ranking: d0, d5 -> rank 1
        _trip(D[1], D[40], "w:10=0.9,11=0.9,12=0.9,13=0.9,14=0.9,15=0.9",
              "w:16=0.8,17=0.8,18=0.8,19=0.8,20=0.8,40=0.1"),  # 11 rows above the target -> rank 11
        _trip(D[2], D[3], "w:9=1", "w:8=1"),  # d8, d9, then zeros by row d0 d1 d2 d3 -> rank 5
    ])
    write_fashioniq(root, "shirt", S, [_trip(S[0], S[30], "w:0=1", "w:1=1")], ext=".png")  # s0 s1 s2..s30 -> 30
    write_fashioniq(root, "toptee", T, [_trip("B00TEXTRA", T[7], "w:7=1", "w:60=0.5")],
                    extra_images={"B00TEXTRA": 60})  # its reference is not in the split file
    return root


@pytest.mark.parametrize("protocol", [None, "clip4cir", "both-orders"])
def test_metrics_match_hand_computed(fiq_root, tmp_path, protocol):
    # the stand-in text tower sums every weight in a text: one order or both give one vector
    bench = load_benchmark("fashioniq", fiq_root, "val", protocol=protocol)
    assert bench.n_queries() == 5 and set(bench.galleries()) == {"dress", "shirt", "toptee", "toptee-refs"}
    assert bench.protocol.startswith(protocol or "clip4cir") and "categories: dress, shirt, toptee" in bench.protocol
    assert [len(t) for t in bench.categories[0].texts] == [1 if protocol != "both-orders" else 2] * 3
    assert bench.galleries()["shirt"].items[0].path.endswith(".png")  # no .jpg: the .png is taken
    _, raw = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    m = raw[("text-only", "cosine")].metrics
    assert m["dress R@10"] == pytest.approx(2 / 3) and m["dress R@50"] == 1.0
    assert m["shirt R@10"] == 0.0 and m["shirt R@50"] == 1.0
    assert m["toptee R@10"] == 1.0 and m["toptee R@50"] == 1.0
    assert m["avg R@10"] == pytest.approx((2 / 3 + 0 + 1) / 3) and m["avg R@50"] == 1.0
    assert m["avg"] == pytest.approx(((2 / 3 + 1) / 3 + 1) / 2)
    assert raw[("text-only", "cosine")].top["dress/0"][:2] == [D[0], D[5]]


def test_reference_outside_the_split_is_embedded(fiq_root, tmp_path):
    bench = fashioniq.load(fiq_root)
    _, raw = evaluate(bench, IndexBackbone(), ["image-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    # image-only: q = e_60, orthogonal to every toptee image -> rows in order, t7 at rank 7
    assert raw[("image-only", "cosine")].top["toptee/0"][:8] == T[:8]


def test_join_and_two_order_average():
    assert fashioniq.join_captions("Is RED.", " has stripes? ") == "Is red and has stripes"
    # CLIP4Cir's validate.py: one order, first capitalised; SEARLE's: both orders, as written
    assert fashioniq.texts_for(["is RED.", " has stripes? "], "clip4cir") == ["Is red and has stripes"]
    assert fashioniq.texts_for(["is RED.", " has stripes? "], "both-orders") == [
        "is RED and has stripes", "has stripes and is RED"]

    class FirstOnly(Method):  # order-sensitive: embeds only the first weight it reads
        name = "first-only-test"

        def _compose(self, refs, texts):
            return self.backbone.encode_texts([t.split(" and ")[0] for t in texts])

    m = FirstOnly(IndexBackbone())
    t = fashioniq.join_captions("w:1=1", "w:2=1"), fashioniq.join_captions("w:2=1", "w:1=1")
    c = compose_queries(m, np.zeros((1, 96), np.float32), [list(t)])
    q, q0 = c.q, c.q_empty
    expect = np.zeros(96)
    expect[[1, 2]] = 1 / np.sqrt(2)
    assert np.allclose(q[0], expect, atol=1e-6) and q0.shape == (1, 96)


def test_missing_category_is_an_error_unless_a_subset_is_asked(fiq_root, tmp_path):
    (fiq_root / "captions" / "cap.toptee.val.json").unlink()
    with pytest.raises(BenchmarkError, match=r"caption file\(s\) not found: captions/cap\.toptee\.val\.json.*--subset"):
        fashioniq.load(fiq_root)
    bench = load_benchmark("fashioniq", fiq_root, "val", subset="shirt,dress")
    assert [c.name for c in bench.categories] == ["dress", "shirt"]
    assert "subset of categories: dress, shirt (avg over these only)" in bench.protocol
    rep, _ = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    assert rep["results"]["text-only"]["cosine"]["avg R@10"] == pytest.approx((2 / 3 + 0) / 2, abs=1e-4)
    with pytest.raises(BenchmarkError, match="unknown category 'skirt'"):
        fashioniq.load(fiq_root, subset="skirt")
    with pytest.raises(BenchmarkError, match="FashionIQ --protocol must be one of clip4cir, both-orders"):
        fashioniq.load(fiq_root, protocol="searle", subset="dress")


def test_image_names_and_folders(tmp_path):
    root = tmp_path / "fiq"
    write_fashioniq(root, "dress", D, [_trip(D[0], D[5], "w:5=1", "a")])
    (root / "images" / f"{D[3]}.jpg").rename(root / "images" / f"{D[3]}.png")  # another extension: taken
    write_image(root / "images" / f"{D[4]}.png", 50)  # a .jpg and a .png: the .jpg wins
    bench = fashioniq.load(root, subset="dress")
    paths = [it.path for it in bench.categories[0].gallery.items]
    assert paths[3].endswith(f"{D[3]}.png") and paths[4].endswith(f"{D[4]}.jpg")
    (root / "images" / f"{D[3]}.png").unlink()
    with pytest.raises(BenchmarkError, match=rf"1 image file\(s\) of dress not found: {D[3]}\.jpg \(the official "
                                             r"loaders read images/<name>\.jpg; no file with another extension"):
        fashioniq.load(root, subset="dress")
    # the start kit's folder: resized_images/<category>/<name>.jpg
    kit = tmp_path / "kit"
    write_fashioniq(kit, "dress", D, [_trip(D[0], D[5], "w:5=1", "a")])
    (kit / "images").rename(tmp_path / "moved")
    (kit / "resized_images").mkdir()
    (tmp_path / "moved").rename(kit / "resized_images" / "dress")
    bench = fashioniq.load(kit, subset="dress")
    assert "resized_images/dress/" in bench.categories[0].gallery.items[0].path


def test_bad_files_name_the_culprit(fiq_root):
    cap = fiq_root / "captions" / "cap.shirt.val.json"
    cap.write_text(json.dumps([{"candidate": S[0], "target": S[1], "captions": ["only one"]}]))
    with pytest.raises(BenchmarkError, match=r"cap\.shirt\.val\.json entry 0: 'captions' should hold exactly 2"):
        fashioniq.load(fiq_root)
    cap.write_text(json.dumps([_trip(S[0], "B00NOPE", "a", "b")]))
    with pytest.raises(BenchmarkError, match="target 'B00NOPE' is not in split.shirt.val.json"):
        fashioniq.load(fiq_root)
    with pytest.raises(BenchmarkError, match="val split"):
        fashioniq.load(fiq_root, "train")
    for c in ("dress", "shirt", "toptee"):  # the official test captions have no target
        (fiq_root / "image_splits" / f"split.{c}.test.json").write_text(json.dumps(S))
        (fiq_root / "captions" / f"cap.{c}.test.json").write_text(json.dumps([{"candidate": S[0], "captions": ["a", "b"]}]))
    with pytest.raises(BenchmarkError, match=r"cap\.dress\.test\.json entry 0: no 'target' \(FashionIQ's test targets"):
        fashioniq.load(fiq_root, "test")
