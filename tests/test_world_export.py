"""The world in every format (`python -m cir_core.world.export`): each export loads with its
benchmark's loader (and the ITT tools), and the CIRR / L-CIRR round trip ranks exactly as the
native world evaluation of the same split: same embeddings, same rankings, same metrics."""
import json

import numpy as np
import pytest

from cir_core.backbone import load_backbone
from cir_core.benchmarks import load_benchmark
from cir_core.eval.loop import embed, evaluate
from cir_core.paths import DEFAULT_BACKBONE
from cir_core.world.export import FORMATS, PROVENANCE, ExportError, export, world_queries
from cir_core.world.export.__main__ import main as export_main
from cir_core.world.export.check import compare
from cir_core.world.export.check import main as check_main
from cir_core.world.export.mapping import second_caption

N = 6  # queries: 48 gallery images


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    base = tmp_path_factory.mktemp("exports")
    return {f: (export(f, "val", base / f, n_queries=N), base / f) for f in FORMATS}


def test_every_format_loads_with_its_loader(exports):
    opts = {"fashioniq": {"subset": "dress"}}
    for fmt in ("cirr", "circo", "fashioniq", "lcirr", "movienet"):
        summary, root = exports[fmt]
        bench = load_benchmark(fmt, root, "val", **opts.get(fmt, {}))
        assert bench.n_queries() == N and bench.labelled
        assert sum(len(g) for g in bench.galleries().values()) == 8 * N == summary["images"]
    summary, root = exports["genecis"]
    tasks = ",".join(t for t, n in summary["tasks"].items() if n)
    assert load_benchmark("genecis", root, "val", subset=tasks).n_queries() == N


def test_official_names_and_keys(exports):
    root = exports["cirr"][1]
    caps = json.loads((root / "captions" / "cap.rc2.val.json").read_text())
    split = json.loads((root / "image_splits" / "split.rc2.val.json").read_text())
    assert set(caps[0]) == {"pairid", "reference", "target_hard", "target_soft", "caption", "img_set"}
    assert set(caps[0]["img_set"]) == {"id", "members", "reference_rank", "target_rank"}
    assert split["dev-0-0-img0"] == "./dev/dev-0-0-img0.png" and (root / "img_raw" / "dev" / "dev-0-0-img0.png").is_file()
    root = exports["circo"][1]
    ann = json.loads((root / "annotations" / "val.json").read_text())
    assert set(ann[0]) == {"reference_img_id", "target_img_id", "relative_caption", "shared_concept", "gt_img_ids",
                           "id", "semantic_aspects"}
    assert ann[0]["gt_img_ids"][0] == ann[0]["target_img_id"] and isinstance(ann[0]["id"], int)
    assert (root / "COCO2017_unlabeled" / "unlabeled2017" / f"{ann[0]['reference_img_id']:012d}.jpg").is_file()
    root = exports["fashioniq"][1]
    trip = json.loads((root / "captions" / "cap.dress.val.json").read_text())[0]
    assert set(trip) == {"target", "candidate", "captions"} and len(trip["captions"]) == 2
    assert trip["captions"][0] != trip["captions"][1] and (root / "images" / f"{trip['candidate']}.jpg").is_file()
    root = exports["genecis"][1]
    for task in ("change_attribute", "change_object"):
        p = root / "genecis" / f"{task}.json"
        if p.is_file():
            s = json.loads(p.read_text())[0]
            assert set(s) == {"condition", "gallery", "reference", "target"} and len(s["gallery"]) == 5
            if task == "change_attribute":
                assert isinstance(s["reference"]["image_id"], str)  # as VAW / GeneCIS store it
            else:
                assert isinstance(s["reference"]["val_image_id"], int)
    prov = json.loads((exports["movienet"][1] / PROVENANCE).read_text())
    assert prov["source"] == "cir_core.world.build_benchmark('val', 6)" and len(prov["items"]) == 8 * N


def test_itt_export_validates_with_the_itt_schema(exports, tmp_path):
    from training.itt import EDIT_TYPES, validate_file
    from training.itt.manifest import read_manifest

    summary, root = exports["itt"]
    ok, errors = validate_file(root / "itt.jsonl")
    assert errors == [] and ok == summary["records"] > 0
    assert summary["records"] + sum(summary["skipped"].values()) == N
    sources = read_manifest(root / "captions.jsonl")  # images checked to exist
    assert len(sources) == N
    recs = [json.loads(x) for x in (root / "itt.jsonl").read_text().splitlines()]
    assert {r["edit_type"] for r in recs} <= set(EDIT_TYPES)
    train = export("itt", "train", tmp_path / "train", n_queries=12)
    assert validate_file(tmp_path / "train" / "itt.jsonl") == (train["records"], [])


def test_train_split_exports_read_as_training_triplets(tmp_path):
    """cirr/lcirr --split train: the training stream's queries, read back by the trainers'
    readers (training/triplets.py) with the native renders as reference and target."""
    from PIL import Image

    from cir_core.world.render import render
    from training.triplets import read_triplets

    summary = export("lcirr", "train", tmp_path / "l", n_queries=7, image_size=32)
    assert summary["queries"] == 7 and summary["images"] == 14
    trip = read_triplets(f"lcirr:{tmp_path / 'l'}")
    cirr = read_triplets(f"cirr:{tmp_path / 'l'}")
    qs = world_queries(7)
    assert [t.edit for t in trip] == [q.text for q in qs] == [t.edit for t in cirr]
    for t, q in zip(trip, qs):
        assert np.array_equal(np.asarray(Image.open(t.ref_image)), np.asarray(render(q.reference, 32, q.ref_seed)))
        assert np.array_equal(np.asarray(Image.open(t.target_image)), np.asarray(render(q.target, 32, q.target_seed)))
    assert len({t.ref_key for t in trip}) == 7 and trip[0].target_key == "train-0-1-img1"


def test_second_caption_rephrases():
    from cir_core.world import build_benchmark

    qs = build_benchmark("val", 30).queries
    other = [second_caption(q) for q in qs]
    assert sum(a != q.text for a, q in zip(other, qs)) >= 25
    assert all(a[0].isupper() and a.endswith(".") for a, q in zip(other, qs) if q.edit_type != "short")


def test_cli_refuses_bad_requests(tmp_path, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert export_main(["cirr", "--split", "val", "--out", str(tmp_path / "full"), "--quiet"]) == 2
    assert "give a new or empty folder" in capsys.readouterr().err
    assert export_main(["circo", "--split", "train", "--out", str(tmp_path / "t"), "--quiet"]) == 2
    assert "train: itt, cirr, lcirr only" in capsys.readouterr().err
    with pytest.raises(ExportError, match="unknown format"):
        export("cirx", "val", tmp_path / "y")
    assert export_main(["movienet", "--split", "val", "--n-queries", "2", "--out", str(tmp_path / "m"), "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["queries"] == 2


def test_cirr_round_trip_ranks_exactly_as_native(exports, tmp_path):
    """The shipped backbone and methods: the export's embeddings equal the native render's, and
    every ranking, R@K and Rs@K are identical (the world's val split, 6 queries)."""
    backbone = load_backbone(DEFAULT_BACKBONE)
    native = load_benchmark("world", split="val", n_queries=N, image_size=backbone.image_size)
    root = exports["cirr"][1]
    cirr = load_benchmark("cirr", root, "val")
    prov = json.loads((root / PROVENANCE).read_text())
    order = [prov["items"][n] for n in cirr.gallery.ids]
    assert order == [it.item_id for it in native.world.items]  # the same gallery, in the same order
    e_native = embed(native.galleries()["gallery"], backbone, tmp_path / "c1", progress=False)
    e_cirr = embed(cirr.gallery, backbone, tmp_path / "c2", progress=False)
    assert np.array_equal(e_native, e_cirr)
    methods = ["sum", "pace"]
    dumps = {}
    for name, bench, cache in (("native", native, "c1"), ("cirr", cirr, "c2")):
        with open(tmp_path / f"{name}.jsonl", "w") as f:
            dumps[name] = evaluate(bench, backbone, methods, ("cosine", "chord"), cache=tmp_path / cache,
                                   progress=False, dump=f)[0]
    res = compare(tmp_path / "native.jsonl", tmp_path / "cirr.jsonl", root)
    assert res["rankings"] == 2 * 2 * N and res["identical"] == res["rankings"]
    for m in methods:
        for sc in ("cosine", "chord"):
            nat, got = dumps["native"]["results"][m][sc], dumps["cirr"]["results"][m][sc]
            assert got == {k: nat[k] for k in got}  # R@1/5/10/50 and Rs@1/2/3
    assert check_main([str(tmp_path / "native.jsonl"), str(tmp_path / "cirr.jsonl"), "--export", str(root)]) == 0
    # L-CIRR (a CIRR root plus lcirr/val.jsonl): the same R@K
    lcirr = load_benchmark("lcirr", exports["lcirr"][1], "val")
    rep, _ = evaluate(lcirr, backbone, ["sum"], ("chord",), cache=tmp_path / "c3", progress=False)
    got = rep["results"]["sum"]["chord"]
    assert got == {k: dumps["native"]["results"]["sum"]["chord"][k] for k in got}
