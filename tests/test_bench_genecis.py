"""GeneCIS evaluator on tiny official-format fixtures: the official crop (on the pixels as stored),
per-query galleries with the target at candidate 0, hand-computed R@1/2/3 per task and the mean
R@1, string image ids in the attribute tasks, a missing task file, a subset of tasks."""
import json

import numpy as np
import pytest
from PIL import Image

from cir_core.benchmarks import genecis, load_benchmark
from cir_core.benchmarks.common import BenchmarkError
from cir_core.eval.loop import evaluate
from cir_core.metrics import candidate_recall
from tests._bench_fixtures import IndexBackbone, colour, write_genecis

VG = {i: (i, (40, 24)) for i in range(1, 6)}  # VG image id i is colour i, 40x24
COCO = {139: 10, 285: 11, 632: 12, 724: 13}


def vg(i, box=(2, 3, 10, 6)):
    # as in the released attribute files (from VAW): the image id is a string
    return {"image_id": str(i), "instance_bbox": list(box), "object_name": "shirt"}


def coco(i):
    return {"val_image_id": i}


@pytest.fixture
def gen_root(tmp_path):
    root = tmp_path / "genecis_data"
    write_genecis(root, "focus_attribute", [
        # candidates (target first) 2, 3, 4, 5 score .5 .9 0 0 -> target 2nd
        {"reference": vg(1), "target": vg(2), "condition": "w:2=0.5,3=0.9", "gallery": [vg(3), vg(4), vg(5)]},
        {"reference": vg(1, (0, 0, 5, 5)), "target": vg(4), "condition": "w:4=1", "gallery": [vg(2), vg(3), vg(5)]},
        # 2 (.9), 4 (.8), then the target 3 (.1) -> 3rd
        {"reference": vg(5), "target": vg(3), "condition": "w:2=0.9,4=0.8,3=0.1", "gallery": [vg(2), vg(4), vg(1)]},
    ], VG, {})
    write_genecis(root, "change_object", [
        {"reference": coco(139), "target": coco(285), "condition": "w:12=0.9,11=0.3", "gallery": [coco(632), coco(724)]},
        {"reference": coco(632), "target": coco(724), "condition": "w:13=1", "gallery": [coco(139), coco(285)]},
    ], {}, COCO)
    return root


def test_missing_task_is_an_error_unless_a_subset_is_asked(gen_root):
    with pytest.raises(BenchmarkError, match=r"task file\(s\) not found: genecis/change_attribute\.json, "
                                             r"genecis/focus_object\.json \(mean R@1 is over all four tasks"):
        load_benchmark("genecis", gen_root, "val")
    with pytest.raises(BenchmarkError, match="task file.*not found: genecis/focus_object.json$"):
        load_benchmark("genecis", gen_root, "val", subset="focus_object,change_object")
    with pytest.raises(BenchmarkError, match="unknown task 'focus'"):
        load_benchmark("genecis", gen_root, "val", subset="focus")


def test_metrics_match_hand_computed(gen_root, tmp_path):
    bench = load_benchmark("genecis", gen_root, "val", subset="change_object,focus_attribute")
    assert [t.name for t in bench.tasks] == ["focus_attribute", "change_object"]
    assert "subset of tasks: focus_attribute, change_object (mean R@1 over these only)" in bench.protocol
    _, raw = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    m = raw[("text-only", "cosine")].metrics
    assert m["focus_attribute R@1"] == pytest.approx(1 / 3)
    assert m["focus_attribute R@2"] == pytest.approx(2 / 3) and m["focus_attribute R@3"] == 1.0
    assert m["change_object R@1"] == 0.5 and m["change_object R@2"] == 1.0
    assert m["mean R@1"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert raw[("text-only", "cosine")].top["change_object/0"][:2] == ["coco632", "coco285"]
    rep, _ = evaluate(bench, IndexBackbone(), ["sum"], ("chord",), cache=tmp_path / "c", progress=False)
    assert 0 <= rep["results"]["sum"]["chord"]["mean R@1"] <= 1


def test_candidate_recall_hand_made():
    s = np.array([[0.2, 0.9, 0.1], [0.5, 0.5, 0.1], [0.1, 0.3, 0.2], [0.7, 0.1, -np.inf]])
    # target (col 0) ranks 1, 0 (tie -> lower column), 2, 0
    assert candidate_recall(s) == {"R@1": 0.5, "R@2": 0.75, "R@3": 1.0}


def test_official_crop_dilate_and_pad():
    assert genecis.crop_box([10, 20, 30, 40], 100, 100) == (0.0, 0.0, 51.0, 68.0)
    assert genecis.crop_box([50, 50, 10, 20], 100, 80) == (43.0, 36.0, 60.0, 70.0)
    sq = genecis.pad_square(Image.new("RGB", (17, 34), (200, 10, 10)))
    assert sq.size == (34, 34)
    assert sq.getpixel((7, 0)) == (0, 0, 0) and sq.getpixel((8, 0)) == (200, 10, 10)
    assert sq.getpixel((24, 33)) == (200, 10, 10) and sq.getpixel((25, 0)) == (0, 0, 0)


def test_all_four_tasks_and_int_ids(gen_root, tmp_path):
    fa = json.loads((gen_root / "genecis" / "focus_attribute.json").read_text())
    for s in fa:  # an int image id (older templates) names the same item as its string
        s["reference"]["image_id"] = int(s["reference"]["image_id"])
    (gen_root / "genecis" / "change_attribute.json").write_text(json.dumps(fa))
    (gen_root / "genecis" / "focus_object.json").write_text((gen_root / "genecis" / "change_object.json").read_text())
    bench = genecis.load(gen_root)
    assert [t.name for t in bench.tasks] == list(genecis.TASKS) and "tasks: focus_attribute, change_attribute" in bench.protocol
    assert bench.tasks[1].gallery.ids == bench.tasks[0].gallery.ids
    _, raw = evaluate(bench, IndexBackbone(), ["text-only"], ("cosine",), cache=tmp_path / "c", progress=False)
    m = raw[("text-only", "cosine")].metrics
    assert m["mean R@1"] == pytest.approx((1 / 3 + 1 / 3 + 1 / 2 + 1 / 2) / 4)
    fa[0]["reference"]["image_id"] = "vg/1"
    (gen_root / "genecis" / "change_attribute.json").write_text(json.dumps(fa))
    with pytest.raises(BenchmarkError, match=r"change_attribute\.json sample 0 reference: key 'image_id' should be a "
                                             "Visual Genome image id"):
        genecis.load(gen_root)


def test_crop_is_taken_from_the_pixels_as_stored(tmp_path):
    """An EXIF-rotated Visual Genome file: the official loader crops the stored pixels (PIL.Image.open
    applies no orientation); the crop must not change with the EXIF tag."""
    root = tmp_path / "g"
    write_genecis(root, "focus_attribute", [
        {"reference": vg(1, (30, 2, 20, 8)), "target": vg(2), "condition": "x", "gallery": [vg(2, (0, 0, 4, 4))]}],
        {1: (1, (60, 20)), 2: (2, (40, 24))}, {})
    path = root / "VG_100K_all" / "1.jpg"
    im = Image.open(path)
    exif = im.getexif()
    exif[0x0112] = 6  # shown rotated by 90°: 20 x 60
    im.save(path, exif=exif.tobytes(), quality=95)
    task = genecis.load(root, subset="focus_attribute").tasks[0]
    crop = task.gallery.load_image(task.gallery.index_of("vg1:30,2,20,8"))
    # on the stored 60x20: left 16, top 0, right min(60, 16+34)=50, bottom min(20, 13.6) -> 34 x 14 -> 34 x 34
    assert crop.size == (34, 34) and not crop.info
    assert genecis.crop_box([30, 2, 20, 8], 60, 20) == (16.0, 0.0, 50.0, 13.6)


def test_gallery_items_are_the_crops(gen_root):
    task = genecis.load(gen_root, subset="focus_attribute").tasks[0]
    i = task.gallery.index_of("vg1:2,3,10,6")
    im = task.gallery.load_image(i)
    # box (2,3,10,6) on 40x24: (0, 0, 17, 10.2) -> 17 x 10, padded to 17 x 17
    assert im.size == (17, 17) and im.getpixel((8, 8))[:2] == pytest.approx(colour(1)[:2], abs=3)
    # the same image with another box is another item with its own cache fingerprint
    j = task.gallery.index_of("vg1:0,0,5,5")
    assert task.gallery.fingerprint(i) != task.gallery.fingerprint(j)


def test_bad_files_name_the_culprit(gen_root, tmp_path):
    path = gen_root / "genecis" / "focus_attribute.json"
    s = json.loads(path.read_text())
    s[1]["gallery"][0]["instance_bbox"] = [1, 2, 0, 3]
    path.write_text(json.dumps(s))
    with pytest.raises(BenchmarkError, match=r"sample 1 gallery\[0\]: instance_bbox should be"):
        genecis.load(gen_root, subset="focus_attribute")
    s[1]["gallery"][0] = vg(99)
    path.write_text(json.dumps(s))
    with pytest.raises(BenchmarkError, match=r"sample 1 gallery\[0\]: image file .*99\.jpg not found"):
        genecis.load(gen_root, subset="focus_attribute")
    with pytest.raises(BenchmarkError, match="task file.*not found"):
        genecis.load(tmp_path)
