"""One home per data set format (`cir_core.formats`): each format registers its evaluation reader,
training reader and writers together; what the world writes in a format reads back with that
format's own readers; the trainers read what the evaluation reads (FashionIQ's one image rule,
CIRR's two layouts, the record checks and their errors naming file, record and key)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from _bench_fixtures import cirr_query, colour, write_cirr, write_fashioniq, write_image, write_jsonl
from PIL import Image

from cir_core.benchmarks import list_benchmarks, load_benchmark
from cir_core.formats import FormatError, get_format, list_formats
from cir_core.world.export import FORMATS, export, world_queries
from training.triplets import KINDS, read_triplets

D = [f"B00D{i:04d}" for i in range(6)]


def test_every_format_is_registered_with_what_reads_and_writes_it():
    assert list_formats() == ["itt", "cirr", "circo", "fashioniq", "genecis", "lcirr", "movienet"]
    for name in list_formats():
        f = get_format(name)
        assert f.name == name and f.description and f.write is not None and (f.read or f.read_train)
        if f.benchmark is not None:
            assert f.benchmark in list_benchmarks() and f.read is not None
    assert KINDS == tuple(list_formats("read_train")) == ("itt", "cirr", "fashioniq", "lcirr")
    assert list_formats("write_train") == ["itt", "cirr", "lcirr"]
    assert FORMATS == (*list_formats("write"), "movienet-release")  # the release: a source the builder reads
    with pytest.raises(FormatError, match="unknown format 'coco'; choose from itt, cirr"):
        get_format("coco")


@pytest.mark.parametrize("name", list_formats("read"))
def test_what_the_world_writes_reads_back_with_the_formats_evaluation_reader(name, tmp_path):
    summary = export(name, "val", tmp_path / name, n_queries=4, image_size=16)
    # an export of one category (FashionIQ) or of some tasks (GeneCIS) reads as that subset
    opts = ({"categories": [summary["category"]]} if "category" in summary else
            {"tasks": [t for t, n in summary["tasks"].items() if n]} if "tasks" in summary else {})
    read = get_format(name).read
    assert read is not None
    assert read(tmp_path / name, "val", **opts)  # every check passed: names, keys, image files
    (tmp_path / name / "world_export.json").unlink()  # no reader reads it
    last = sorted((tmp_path / name).rglob("*.json*"), key=str)[-1]  # an annotation file, broken: named
    last.write_text("{not json")
    with pytest.raises(FormatError, match=rf"{last.name}.*not valid JSON"):
        read(tmp_path / name, "val", **opts)


@pytest.mark.parametrize("name", list_formats("write_train"))
def test_a_train_split_the_world_writes_is_what_the_trainers_read(name, tmp_path):
    summary = export(name, "train", tmp_path / name, n_queries=5, image_size=16)
    trips = read_triplets(f"{name}:{tmp_path / name / ('itt.jsonl' if name == 'itt' else '')}")
    texts = [q.text for q in world_queries(5)]
    if name == "itt":  # one record per query of an ITT edit type
        assert len(trips) == summary["records"] and {t.edit for t in trips} <= set(texts)
    else:
        assert [t.edit for t in trips] == texts and all(t.target_image for t in trips)


@pytest.fixture
def fiq_train(tmp_path):
    """FashionIQ train, every category: dress's images by the image rule's cases."""
    root = tmp_path / "fiq"
    for cat, first in (("dress", 0), ("shirt", 10), ("toptee", 20)):
        names = [n.replace("D", cat[0].upper(), 1) for n in D] if cat != "dress" else D
        write_fashioniq(root, cat, names, [{"candidate": names[0], "target": names[1], "captions": ["is RED.", "has stripes"]},
                                           {"candidate": names[2], "target": names[3], "captions": ["a", "b"]}],
                        first=first, split="train")
    write_image(root / "images" / f"{D[0]}.png", 50)  # a .jpg and a .png: the .jpg is the one the loaders open
    (root / "images" / f"{D[1]}.jpg").rename(root / "images" / f"{D[1]}.png")  # no .jpg: another extension
    (root / "resized_images" / "dress").mkdir(parents=True)  # the start kit's folder
    (root / "images" / f"{D[2]}.jpg").rename(root / "resized_images" / "dress" / f"{D[2]}.jpg")
    return root


def test_fashioniq_has_one_image_rule_for_evaluation_and_training(fiq_train):
    """images/<asin>.jpg first, as CLIP4Cir's, SEARLE's and the start kit's loaders open it (the
    trainers took a .png first before: another image than the evaluation's)."""
    trips = read_triplets(f"fashioniq:{fiq_train}")
    assert len(trips) == 6 and trips[0].edit == "Is red and has stripes" and trips[0].edit_type == "dress"
    assert trips[0].ref_image.endswith(f"images/{D[0]}.jpg")
    assert np.asarray(Image.open(trips[0].ref_image))[0, 0].tolist() == list(colour(0))
    assert trips[0].target_image.endswith(f"images/{D[1]}.png")
    assert trips[1].ref_image.endswith(f"resized_images/dress/{D[2]}.jpg")
    # the evaluation reader finds the very same files (the train files copied as val)
    for src in [*fiq_train.glob("captions/*.train.json"), *fiq_train.glob("image_splits/*.train.json")]:
        src.with_name(src.name.replace(".train.", ".val.")).write_text(src.read_text())
    bench = load_benchmark("fashioniq", fiq_train, "val")
    paths = {it.id: str(Path(it.path).resolve()) for it in bench.categories[0].gallery.items}
    assert [paths[n] for n in D[:3]] == [trips[0].ref_image, trips[0].target_image, trips[1].ref_image]


def test_fashioniq_training_errors_name_file_entry_and_key(fiq_train):
    cap = fiq_train / "captions" / "cap.shirt.train.json"
    cap.write_text(json.dumps([{"candidate": "B00S0000", "target": "B00S0001", "captions": ["one"]}]))
    with pytest.raises(FormatError, match=r"cap\.shirt\.train\.json entry 0: 'captions' should hold exactly 2"):
        read_triplets(f"fashioniq:{fiq_train}")
    cap.write_text("[]")
    with pytest.raises(FormatError, match=r"cap\.shirt\.train\.json: expected a non-empty list of triplets"):
        read_triplets(f"fashioniq:{fiq_train}")
    (fiq_train / "resized_images" / "dress" / f"{D[2]}.jpg").unlink()
    with pytest.raises(FormatError, match=rf"cap\.dress\.train\.json entry 1: candidate '{D[2]}': no image "
                                          rf"{D[2]}\.jpg in .*images \(the official loaders read images/<name>\.jpg"):
        read_triplets(f"fashioniq:{fiq_train}")


NAMES = [f"train-{i}-0-img0" for i in range(6)]


def test_cirr_and_lcirr_train_read_either_layout_with_the_evaluations_checks(tmp_path):
    """The trainers read CIRR where the evaluation does (also SEARLE/CLIP4Cir's layout), with the
    same record checks."""
    qs = [cirr_query(i, NAMES[i], NAMES[(i + 1) % 6], f"Change it to {i}.", NAMES[:3]) for i in range(6)]
    for layout in ("official", "searle"):
        root = write_cirr(tmp_path / layout, "train", NAMES, qs, layout=layout)
        ann = root / "cirr" if layout == "searle" else root
        write_jsonl(ann / "lcirr" / "train.jsonl", [{"pairid": i, "reference": NAMES[i], "target": NAMES[i - 1],
                                                      "text": f" Long {i}. Text. "} for i in range(6)])
        cirr = read_triplets(f"cirr:{root}")
        assert [t.edit for t in cirr] == [q["caption"] for q in qs]
        assert cirr[2].target_image.endswith(f"train/{NAMES[3]}.png") and cirr[2].target_key == NAMES[3]
        lcirr = read_triplets(f"lcirr:{root}")
        assert lcirr[1].edit == "Long 1. Text." and lcirr[1].target_key == NAMES[0]
    caps = tmp_path / "official" / "captions" / "cap.rc2.train.json"
    caps.write_text(json.dumps([qs[0], {**qs[1], "pairid": 0}]))
    with pytest.raises(FormatError, match=r"cap\.rc2\.train\.json entry 1: duplicate pairid 0"):
        read_triplets(f"cirr:{tmp_path / 'official'}")
    bad = {k: v for k, v in qs[1].items() if k != "target_hard"}
    caps.write_text(json.dumps([qs[0], bad]))
    with pytest.raises(FormatError, match=r"cap\.rc2\.train\.json entry 1: missing key 'target_hard'"):
        read_triplets(f"cirr:{tmp_path / 'official'}")
    write_jsonl(tmp_path / "official" / "lcirr" / "train.jsonl", [{"pairid": 1, "reference": NAMES[0],
                                                                   "target": "train-9-0-img0", "text": "x."}])
    with pytest.raises(FormatError, match=r"train\.jsonl query 1: target 'train-9-0-img0' is not in "
                                          r"image_splits/split\.rc2\.train\.json"):
        read_triplets(f"lcirr:{tmp_path / 'official'}")


def test_movienet_writer_and_builder_records_read_back_with_the_reader(tmp_path):
    """The MovieNet identity set's writer (a `Split`: several characters on a picture, a query
    with no character) and its record functions (the builder's: cast boxes) read back with its
    reader; a duplicate frame and a box that is not the character's are named by file and line."""
    from cir_core.formats import Folder, Picture, Query, Split
    from cir_core.formats import movienet as mn

    def draw():
        return Image.new("RGB", (16, 16), (200, 10, 10))

    pics = [Picture("a", "src-a", draw, characters=("Ann", "Bo"), film="f1"),
            Picture("b", "src-b", draw, characters=(), film="f1"), Picture("c", "src-c", draw, film="f2")]
    split = Split("val", pics, [Query("q0", 0, None, "Make it blue.", character="Bo"),
                                Query("q1", 2, None, "Zoom out.")])
    out = Folder(tmp_path / "w", 16, False)
    assert mn.write(split, out) == {"split_name": "val", "queries": 2, "gallery": 3}
    frames, queries = get_format("movienet").read(tmp_path / "w", "val")
    assert [(f.frame, f.film_id, f.character_ids) for f in frames] == [
        ("frames/f1/shot_000000_img_0.jpg", "f1", ["Ann", "Bo"]), ("frames/f1/shot_000001_img_0.jpg", "f1", []),
        ("frames/f2/shot_000002_img_0.jpg", "f2", [])]
    assert [(q.query_id, q.reference_frame, q.film_id, q.character_id) for q in queries] == [
        ("q0", frames[0].frame, "f1", "Bo"), ("q1", frames[2].frame, "f2", None)]
    assert out.items["frames/f1/shot_000001_img_0.jpg"] == "src-b" and out.queries == {"q0": "q0", "q1": "q1"}
    with pytest.raises(ValueError, match="needs every picture's film"):
        mn.write(Split("val", [Picture("x", "x", draw)], []), Folder(tmp_path / "x", 16, False))
    with pytest.raises(FormatError, match="one split; use --split val, not 'test'"):
        mn.read(tmp_path / "w", "test")

    root = tmp_path / "built"  # the builder's records: cast boxes, a box given or the character's only one
    f0 = frames[0].frame
    write_image(root / f0, 0)
    gal = [mn.gallery_record(f0, "f1", ["Ann"], [("Ann", (1, 2, 8, 9)), ("others", (0, 0, 4, 4))], (16, 16))]
    write_jsonl(root / mn.GALLERY, gal)
    write_jsonl(root / mn.QUERIES, [mn.query_record("0", f0, "Smile.", "f1", "Ann", character_name="Ann A",
                                                    actor="Al", edit_type="short"),
                                    mn.query_record("1", f0, "Frown.", "f1", "Ann", character_box=[1, 2, 8, 9])])
    _, (q0, q1) = mn.read_set(root)
    assert (q0.character_box, q0.character_name, q0.actor, q0.edit_type) == ([1.0, 2.0, 8.0, 9.0], "Ann A", "Al", "short")
    assert q1.character_box == [1.0, 2.0, 8.0, 9.0] and q1.character_name is None
    write_jsonl(root / mn.QUERIES, [mn.query_record("0", f0, "Smile.", "f1", "Ann", character_box=[0, 0, 4, 4])])
    with pytest.raises(FormatError, match=r"queries\.jsonl line 1: 'character_box' \[0\.0, 0\.0, 4\.0, 4\.0\] is not a box of 'Ann'"):
        mn.read_set(root)
    write_jsonl(root / mn.GALLERY, gal * 2)
    with pytest.raises(FormatError, match=rf"gallery\.jsonl line 2: duplicate frame '{f0}'"):
        mn.read_set(root)
    # blank lines between records: the error names the file's own line, not the record's count
    (root / mn.GALLERY).write_text("\n\n".join(json.dumps(r) for r in gal * 2) + "\n", encoding="utf-8")
    with pytest.raises(FormatError, match=rf"gallery\.jsonl line 3: duplicate frame '{f0}'"):
        mn.read_set(root)
