"""CIRR evaluator on tiny rc2-format fixtures: hand-computed recalls, server files, bad input."""
import json

import numpy as np
import pytest

from cir_core.benchmarks import cirr, load_benchmark
from cir_core.benchmarks.common import BenchmarkError
from cir_core.eval import cli as ev
from cir_core.eval.loop import evaluate
from tests._bench_fixtures import IndexBackbone, cirr_query, write_cirr

N = [f"dev-{i}-0-img0" for i in range(12)]


def _val_queries():
    # text-only: the query is the weight vector, so the ranking is the weights' order (ties: row)
    return [
        # rank of n2: n3 (.9) first, then n2 -> 1;  members without ref: n3, n2, n5, n6, n7 -> 1
        cirr_query(1, N[0], N[2], "w:0=1.0,2=0.8,3=0.9,5=0.1", [N[0], N[2], N[3], N[5], N[6], N[7]]),
        # n6 .7, n4 .6, n7 .5 -> 2;  members: n4, n7, n2, n0, n5 -> 1
        cirr_query(2, N[1], N[7], "w:7=0.5,4=0.6,6=0.7,2=0.2,3=0.1", [N[1], N[7], N[4], N[0], N[5], N[2]]),
        # n5 first -> 0;  members -> 0
        cirr_query(3, N[4], N[5], "w:5=1", [N[4], N[5], N[6], N[7], N[0], N[1]]),
        # n1 n3 n4 n5 n6 then n0 -> 5;  members: n1 n3 n4 n0 n7 -> 3
        cirr_query(4, N[2], N[0], "w:1=0.9,3=0.8,4=0.7,5=0.6,6=0.5,0=0.1", [N[2], N[0], N[7], N[1], N[3], N[4]]),
    ]


@pytest.fixture
def cirr_root(tmp_path):
    return write_cirr(tmp_path / "cirr", "val", N, _val_queries())


def test_val_metrics_match_hand_computed(cirr_root, tmp_path):
    bench = load_benchmark("cirr", cirr_root, "val")
    assert bench.n_queries() == 4 and len(bench.gallery) == 12
    rep, raw = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    m = rep["results"]["text-only"]["cosine"]
    # target ranks 1, 2, 0, 5 (11 rankable rows: R@50 is not defined); subset ranks 1, 1, 0, 3
    assert m == {"R@1": 0.25, "R@5": 0.75, "R@10": 1.0, "Rs@1": 0.25, "Rs@2": 0.75, "Rs@3": 0.75}
    res = raw[("text-only", "cosine")]
    assert res.top["1"][:3] == [N[3], N[2], N[5]] and N[0] not in res.top["1"]
    assert res.aux["subset"]["4"] == [N[1], N[3], N[4]]


def test_images_directly_under_root_and_chord_runs(tmp_path):
    root = write_cirr(tmp_path / "flat", "val", N, _val_queries(), img_raw=False)
    bench = cirr.load(root, "val")
    rep, _ = evaluate(bench, IndexBackbone(), ["text-only", "image-only"], cache=tmp_path / "c", progress=False)
    assert set(rep["results"]["text-only"]) == {"cosine", "chord"}
    # image-only: q - q_empty = 0, so Chord equals cosine exactly
    assert rep["results"]["image-only"]["chord"] == rep["results"]["image-only"]["cosine"]


def test_searle_clip4cir_layout(tmp_path):
    """SEARLE, CLIP4Cir and GeneCIS keep ROOT/cirr/{captions,image_splits} and the images at
    ROOT/dev, ROOT/test1: --root ROOT works, and so does --root ROOT/cirr."""
    root = write_cirr(tmp_path / "searle", "val", N, _val_queries(), layout="searle")
    assert not (root / "captions").exists() and (root / "cirr" / "captions").is_dir() and (root / "dev").is_dir()
    for r in (root, root / "cirr"):
        bench = load_benchmark("cirr", r, "val")
        assert bench.n_queries() == 4 and "SEARLE" in bench.layout
        _, raw = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
        assert raw[("text-only", "cosine")].metrics["R@5"] == 0.75
    official = load_benchmark("cirr", write_cirr(tmp_path / "off", "val", N, _val_queries()), "val")
    assert official.layout.startswith("official")
    with pytest.raises(BenchmarkError, match=r"no CIRR split file; expected image_splits/split\.rc2\.val\.json"):
        load_benchmark("cirr", tmp_path, "val")
    (root / "dev" / f"{N[0]}.png").unlink()  # the first image decides where the images are
    with pytest.raises(BenchmarkError, match="first image './dev/dev-0-0-img0.png' is in none of"):
        load_benchmark("cirr", root, "val")


def test_images_are_decoded_as_stored(tmp_path):
    """No EXIF transposition (the official loaders use PIL.Image.open + convert('RGB'))."""
    from PIL import Image
    root = write_cirr(tmp_path / "exif", "val", N, _val_queries())
    path = root / "img_raw" / "dev" / f"{N[1]}.jpg"
    im = Image.new("RGB", (40, 20), (200, 10, 10))
    exif = im.getexif()
    exif[0x0112] = 6  # rotate 90° on display
    im.save(path, exif=exif.tobytes())
    split = root / "image_splits" / "split.rc2.val.json"
    split.write_text(json.dumps({**json.loads(split.read_text()), N[1]: f"./dev/{N[1]}.jpg"}))
    bench = load_benchmark("cirr", root, "val")
    got = bench.gallery.load_image(bench.gallery.index_of(N[1]))
    assert got.size == (40, 20) and not got.info
    assert "as-stored" in bench.gallery.fingerprint(0)


def test_test1_submission_files_validate(tmp_path):
    names = [f"test1-{i}-0-img0" for i in range(55)]
    qs = [cirr_query(7, names[0], None, "w:3=0.9,0=1,5=0.5", [names[0], names[3], names[5], names[9], names[1], names[2]]),
          cirr_query(9, names[4], None, "w:4=1,8=0.3", names[4:10])]
    root = write_cirr(tmp_path / "t", "test1", names, qs)
    bench = load_benchmark("cirr", root, "test")
    assert not bench.labelled
    with pytest.raises(BenchmarkError, match="cirr has no option --protocol"):
        load_benchmark("cirr", root, "test", protocol="keep-reference")
    _, raw = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    files = bench.write_submission(raw[("text-only", "cosine")], tmp_path / "pred.json")
    rec, sub = (json.loads(f.read_text()) for f in files)
    assert files[1].name == "pred.subset.json"
    assert rec["version"] == "rc2" and rec["metric"] == "recall" and sub["metric"] == "recall_subset"
    assert len(rec["7"]) == 50 and rec["7"][:2] == [names[3], names[5]] and names[0] not in rec["7"]
    assert sub["7"] == [names[3], names[5], names[1]]  # then the zero-score members by row
    assert sub["9"] == [names[8], names[5], names[6]]


def test_validate_submission_rules():
    pids, refs, gal = ["1", "2"], ["a0", "a1"], {f"a{i}" for i in range(60)}
    good = {"version": "rc2", "metric": "recall", "1": [f"a{i}" for i in range(2, 52)],
            "2": [f"a{i}" for i in range(2, 52)]}
    cirr.validate_submission(good, pids, refs, gal, "recall")
    bad_cases = [
        ({**good, "version": "rc1"}, "version"),
        ({k: v for k, v in good.items() if k != "2"}, "missing"),
        ({**good, "3": good["1"]}, "unknown"),
        ({**good, "1": good["1"][:49]}, "50 distinct"),
        ({**good, "1": good["1"][:49] + ["a2"]}, "50 distinct"),
        ({**good, "2": ["a1"] + good["2"][:49]}, "own reference"),
        ({**good, "1": good["1"][:49] + ["zz"]}, "not in the split"),
    ]
    for sub, msg in bad_cases:
        with pytest.raises(BenchmarkError, match=msg):
            cirr.validate_submission(sub, pids, refs, gal, "recall")
    with pytest.raises(BenchmarkError, match="3 distinct"):
        cirr.validate_submission({"version": "rc2", "metric": "recall_subset", "1": ["a2", "a3"],
                                  "2": ["a2", "a3", "a4"]}, pids, refs, gal, "recall_subset")


def test_bad_files_name_the_culprit(cirr_root):
    cap = cirr_root / "captions" / "cap.rc2.val.json"
    entries = json.loads(cap.read_text())
    del entries[2]["caption"]
    cap.write_text(json.dumps(entries))
    with pytest.raises(BenchmarkError, match=r"cap\.rc2\.val\.json entry 2: missing key 'caption'"):
        cirr.load(cirr_root, "val")
    entries[2]["caption"] = "x"
    entries[1]["target_hard"] = "nope"
    cap.write_text(json.dumps(entries))
    with pytest.raises(BenchmarkError, match="'nope' is not in image_splits"):
        cirr.load(cirr_root, "val")
    entries[1]["target_hard"] = N[7]
    cap.write_text(json.dumps(entries))
    (cirr_root / "img_raw" / "dev" / f"{N[3]}.png").unlink()
    with pytest.raises(BenchmarkError, match=f"1 image file.*{N[3]}"):
        cirr.load(cirr_root, "val")


def test_cli_on_fixture_with_tiny_backbone(cirr_root, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CIR_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "r.json"
    assert ev.main(["--benchmark", "cirr", "--root", str(cirr_root), "--backbone", "cir-tiny-vit",
                    "--methods", "sum", "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    m = rep["results"]["sum"]["chord"]
    assert rep["benchmark"] == "cirr" and 0 <= m["R@1"] <= m["R@5"] <= m["R@10"] <= 1
    assert "Rs@3" in capsys.readouterr().out
    # --submission needs one method and one scoring; on val it refuses nothing else
    assert ev.main(["--benchmark", "cirr", "--root", str(cirr_root), "--methods", "sum",
                    "--submission", str(tmp_path / "s.json")]) == 2
    assert "exactly one" in capsys.readouterr().err
    assert ev.main(["--benchmark", "nope", "--root", str(cirr_root), "--methods", "sum"]) == 2
    assert "unknown benchmark" in capsys.readouterr().err


def test_subset_ranking_breaks_ties_by_row():
    from cir_core.metrics import subset_ranking
    sub = subset_ranking(np.array([[0.5, 0.2, 0.5, -np.inf]]), np.array([[7, 3, 2, -1]]), np.array([3]))
    assert sub.tolist() == [[2, 7, -1, -1]]
