"""`python -m cir_core.benchmarks.movienet build`: MovieNet's release (hand-written files in the
official schema, and the film world's export) into identity-200 and qualitative-1151-shaped sets."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from _movienet_fixtures import BIG, FILM, RES, write_release

from cir_core.benchmarks import load_movienet_queryset
from cir_core.benchmarks.common import BenchmarkError
from cir_core.benchmarks.movienet.__main__ import main
from cir_core.benchmarks.movienet.build import PRESETS, ReferenceRules, build_set, candidates, scaled
from cir_core.benchmarks.movienet.edits import read_edits
from cir_core.benchmarks.movienet.release import read_release
from cir_core.world.export import export


@pytest.fixture()
def release(tmp_path: Path) -> Path:
    return write_release(tmp_path / "release")


def small(preset: str = "identity-200", **kw):
    counts = dict(n_queries=2, n_references=2, n_ref_films=1, n_gallery=8, n_gallery_films=3)
    return scaled(PRESETS[preset], **{**counts, **kw})


def test_the_reference_rules(release):
    film = read_release(release)[FILM]
    got = {(r.key, r.person.pid) for r in candidates(film, ReferenceRules())}
    assert got == {((0, 0), "nm0000001"), ((5, 1), "nm0000002")}
    assert {r.person.pid for r in candidates(film, ReferenceRules(min_height=0.1, min_area=0.005))} \
        == {"nm0000001", "nm0000002"}  # R3 loosened: Rose's small box on shot 1 joins
    assert len(candidates(film, ReferenceRules(min_positives=0))) == 3  # Cal's only shot joins


def test_builds_a_set_with_boxes_and_names(release, tmp_path):
    out = tmp_path / "set"
    s = build_set(release, out, small())
    assert (s["references"], s["reference_films"], s["gallery"], s["gallery_films"], s["queries"]) == (2, 1, 8, 3, 0)
    assert not (out / "queries.jsonl").exists()
    manifest = [json.loads(x) for x in (out / "references.jsonl").read_text().splitlines()]
    assert {m["caption"] for m in manifest} == {"a film still of Jack in a deck, run, hug", "a film still of Rose"}
    edits = tmp_path / "edits.csv"
    edits.write_text("reference_frame,edit\n" + "".join(f"{m['id']},Put {m['caption'][16:20]} on a beach.\n"
                                                         for m in manifest))
    build_set(release, out, small(), edits=read_edits(edits))
    queries, gallery = load_movienet_queryset(out)
    assert len(queries) == 2 and len(gallery) == 8
    by = {q["meta"]["character_name"]: q for q in queries}
    assert by["Jack"]["reference_id"] == f"keyframes/{FILM}/shot_0000_img_0.jpg"
    assert by["Jack"]["meta"]["character_box"] == [float(v) for v in BIG] and by["Jack"]["meta"]["actor"] == "Leo"
    assert by["Rose"]["edit_text"] == "Put Rose on a beach."
    ref = gallery.items[gallery.index_of(by["Jack"]["reference_id"])]
    assert ref.meta["reference_character"]["name"] == "Jack" and ref.meta["resolution"] == RES
    for it in gallery.items:  # cast ids and boxes kept; the frames are under the set
        assert Path(it.path).is_file() and it.meta["character_ids"] == \
            [c["pid"] for c in it.meta["cast"] if c["pid"] != "others"][:len(it.meta["character_ids"])]
    jack_frames = [it for it in gallery.items if "nm0000001" in it.meta["character_ids"]]
    assert len(jack_frames) >= 2  # the reference and at least one positive from another shot


def test_qualitative_shape_spreads_queries_over_references(release, tmp_path):
    out = tmp_path / "q"
    build_set(release, out, small("qualitative-1151", n_queries=13))
    manifest = [json.loads(x) for x in (out / "references.jsonl").read_text().splitlines()]
    assert len(manifest) == 4  # 7 and 6 edits wanted, 5 edit types per caption: two variants each
    rows = [{"image_id": m["id"], "edit": f"edit {k} of {m['id']}"} for m in manifest for k in range(4)]
    (tmp_path / "e.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    build_set(release, out, small("qualitative-1151", n_queries=13), edits=read_edits(tmp_path / "e.jsonl"))
    queries, _ = load_movienet_queryset(out)
    per_ref: dict[str, int] = {}
    for q in queries:
        per_ref[q["reference_id"]] = per_ref.get(q["reference_id"], 0) + 1
    assert sorted(per_ref.values()) == [6, 7] and len({q["edit_text"] for q in queries}) == 13


@pytest.mark.parametrize("mutate, words", [
    (lambda a: a["cast"][0]["body"].update(bbox=[1, 2, 3]), ["cast record #0", f"{FILM}_000001", "body.bbox"]),
    (lambda a: a["cast"][1].update(pid="nm9999999"), ["cast record #1", f"{FILM}_000002", "'pid'"]),
    (lambda a: a["cast"][2].update(shot_idx=77), ["cast record #2", "'shot_idx'", "shot_0077_img_0.jpg"]),
    (lambda a: a["cast"][0].pop("resolution"), ["cast record #0", "resolution"]),
    (lambda a: a["scene"][0].update(place_tag=3), ["scene record #0", f"{FILM}_0000", "place_tag"]),
    (lambda a: a.update(imdb_id="tt7654321"), ["imdb_id"]),
])
def test_bad_release_files_are_refused_by_file_record_and_key(release, tmp_path, mutate, words):
    path = release / "annotation" / f"{FILM}.json"
    ann = json.loads(path.read_text())
    mutate(ann)
    path.write_text(json.dumps(ann))
    out = tmp_path / "set"
    with pytest.raises(BenchmarkError) as e:
        build_set(release, out, small())
    assert str(path) in str(e.value) and all(w in str(e.value) for w in words), e.value
    assert not out.exists()  # nothing written


def test_films_reads_only_those(release, tmp_path):
    assert set(read_release(release, [FILM, "tt0000002"])) == {FILM, "tt0000002"}
    s = build_set(release, tmp_path / "set", small(n_gallery=6, n_gallery_films=2), films=[FILM, "tt0000003"])
    films = {json.loads(x)["film_id"] for x in (tmp_path / "set" / "gallery.jsonl").read_text().splitlines()}
    assert films == {FILM, "tt0000003"} and s["films_read"] == 2
    with pytest.raises(BenchmarkError, match="not IMDb ids"):
        read_release(release, ["Titanic"])
    with pytest.raises(BenchmarkError, match="tt0000009.json"):
        read_release(release, ["tt0000009"])


def test_bad_edits_and_requests_are_refused(release, tmp_path, capsys):
    out = tmp_path / "set"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"reference_frame": "keyframes/tt0000001/shot_0003_img_0.jpg", "edit": "x"}\n')
    with pytest.raises(BenchmarkError, match="line 1.*neither a query id"):
        build_set(release, out, small(), edits=read_edits(bad))
    bad.write_text('{"query_id": "00000", "edit": "only one"}\n')
    with pytest.raises(BenchmarkError, match="no edit left for query 00001"):
        build_set(release, out, small(), edits=read_edits(bad))
    bad.write_text('{"query_id": "00000", "edit": ""}\n')
    with pytest.raises(BenchmarkError, match="line 1: key 'edit'"):
        read_edits(bad)
    argv = ["build", "--release", str(release), "--out", str(out), "--preset", "identity-200"]
    assert main(argv) == 2 and "reference films wanted" in capsys.readouterr().err  # 62 films asked of 3
    assert main(argv + ["--n-references", "2", "--n-queries", "1"]) == 2
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert main(["build", "--release", str(release), "--out", str(tmp_path / "full"), "--preset",
                 "identity-200", "--n-queries", "2", "--n-references", "2", "--n-ref-films", "1", "--n-gallery", "8",
                 "--n-gallery-films", "3"]) == 2
    assert "not empty" in capsys.readouterr().err


@pytest.fixture(scope="module")
def world_release(tmp_path_factory):
    out = tmp_path_factory.mktemp("mn-world")
    export("movienet-release", "val", out, n_queries=4, image_size=64, n_films=5)
    return out


@pytest.mark.parametrize("preset, counts", [
    ("identity-200", dict(n_queries=12, n_references=12, n_ref_films=4, n_gallery=200, n_gallery_films=5)),
    ("qualitative-1151", dict(n_queries=23, n_references=6, n_ref_films=2, n_gallery=400, n_gallery_films=5)),
])
def test_the_world_export_round_trips_through_the_builder(world_release, tmp_path, preset, counts):
    out = tmp_path / "set"
    p = scaled(PRESETS[preset], **counts)
    build_set(world_release, out, p, seed=3)
    rows = [json.loads(x) for x in (out / "references.jsonl").read_text().splitlines()]
    edits = tmp_path / "e.jsonl"
    edits.write_text("".join(json.dumps({"image_id": r["id"], "edit": f"{k}: {r['caption']} at dawn"}) + "\n"
                             for r in rows for k in range(5)))
    build_set(world_release, out, p, seed=3, edits=read_edits(edits))
    queries, gallery = load_movienet_queryset(out)
    rel = read_release(world_release)
    refs = {q["reference_id"] for q in queries}
    assert len(queries) == p.n_queries and len(refs) == p.n_references and len(gallery) == p.n_gallery
    assert len({q["meta"]["film_id"] for q in queries}) == p.n_ref_films
    assert len({it.meta["film_id"] for it in gallery.items}) == p.n_gallery_films
    for it in gallery.items:  # every frame keeps the release's cast ids and boxes
        film = rel[it.meta["film_id"]]
        key = next(k for k, v in film.keyframes.items() if v == it.id)
        assert it.meta["cast"] == [{"pid": x.pid, "bbox": list(x.box)} for x in film.persons[key]]
    for q in queries:  # the character is credited, boxed once on the reference, and shown elsewhere
        m = q["meta"]
        ref = gallery.items[gallery.index_of(q["reference_id"])]
        assert [c["bbox"] for c in ref.meta["cast"] if c["pid"] == m["character_id"]] == [m["character_box"]]
        assert m["character_name"] == dict(rel[m["film_id"]].cast)[m["character_id"]][1]
        assert any(m["character_id"] in it.meta["character_ids"] for it in gallery.items if it.id != ref.id)


def _edit_record(release: Path, i: int, **changes) -> Path:
    path = release / "annotation" / f"{FILM}.json"
    ann = json.loads(path.read_text())
    ann["cast"][i].update(changes)
    path.write_text(json.dumps(ann))
    return path


def test_a_box_far_outside_its_frame_is_refused_by_file_record_and_key(release, tmp_path):
    """Issue 45: [100, 10, 400, 80] in a 160x90 frame was clipped silently into another box."""
    path = _edit_record(release, 1, resolution=[160, 90], body={"type": "detected", "bbox": [100, 10, 400, 80]})
    out = tmp_path / "set"
    with pytest.raises(BenchmarkError) as e:
        build_set(release, out, small())
    msg = str(e.value)
    assert str(path) in msg and "cast record #1" in msg and f"{FILM}_000002" in msg and "body.bbox" in msg
    assert "160x90" in msg and not out.exists()
    assert main(["build", "--release", str(release), "--out", str(out), "--preset", "identity-200", "--n-queries", "2",
                 "--n-references", "2", "--n-ref-films", "1", "--n-gallery", "8", "--n-gallery-films", "3",
                 "--box-slack", "0.99"]) == 2  # a slack of 99 % still cannot clip a box 150 % out


def test_a_box_overhanging_by_a_pixel_is_clipped_and_reported(release, tmp_path):
    _edit_record(release, 1, body={"type": "detected", "bbox": [0, -1, 20, 30]})  # 1 px above a 180 px frame
    s = build_set(release, tmp_path / "set", small())
    assert s["clipped_boxes"] == 1 and "cast record #1" in s["clipped"][0] and "clipped to [0.0, 0.0, 20.0, 30.0]" \
        in s["clipped"][0]
    assert json.loads((tmp_path / "set" / "build.json").read_text())["clipped_boxes"] == 1


def test_a_truncated_keyframe_is_refused_before_anything_is_written(release, tmp_path):
    """Issue 45: a keyframe cut to 40 bytes was hard-linked into the set; the evaluation failed later."""
    frame = release / "keyframes" / FILM / "shot_0000_img_0.jpg"  # Jack's reference: always in the set
    frame.write_bytes(frame.read_bytes()[:40])
    out = tmp_path / "set"
    with pytest.raises(BenchmarkError) as e:
        build_set(release, out, small())
    msg = str(e.value)
    assert str(frame) in msg and "cannot be read whole" in msg and "cast record #0" in msg and not out.exists()


def test_a_resolution_that_does_not_fit_the_keyframe_is_refused(release, tmp_path):
    """Issue 45: an annotation's `resolution` was never compared with the image."""
    path = _edit_record(release, 0, resolution=[320, 320])  # the keyframe is 32x18: another shape
    out = tmp_path / "set"
    with pytest.raises(BenchmarkError) as e:
        build_set(release, out, small())
    msg = str(e.value)
    assert str(path) in msg and "cast record #0" in msg and "'resolution'" in msg and "32x18" in msg
    assert not out.exists()
