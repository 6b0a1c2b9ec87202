"""`python -m cir_core.world.export movienet-release`: the film world in MovieNet's release layout,
read back by the MovieNet set builder's release reader to the same keyframes, cast and boxes."""
from __future__ import annotations

import json

import pytest
from PIL import Image

from cir_core.benchmarks.movienet.release import read_release
from cir_core.world.export import export
from cir_core.world.export.__main__ import main
from cir_core.world.export.movienet_release import cast_pid
from cir_core.world.films.benchmark import build_film_benchmark

SIZE = 64


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    out = tmp_path_factory.mktemp("movienet")
    summary = export("movienet-release", "val", out, n_queries=12, image_size=SIZE, n_films=2)
    return out, summary, build_film_benchmark("val", 12, 2)


def test_reads_back_to_the_same_keyframes_cast_and_boxes(release):
    out, summary, bench = release
    films = read_release(out)
    assert set(films) == {f.film_id for f in bench.films}
    assert summary["keyframes"] == len(bench.items) == sum(len(f.keyframes) for f in films.values())
    for world in bench.films:
        got = films[world.film_id]
        assert got.cast == {c.pid: (c.actor, c.character) for c in world.cast} and len(got.cast) <= 10
        for it in (x for x in bench.items if x.keyframe.film_id == world.film_id):
            k = it.keyframe
            want = [(cast_pid(w, world), box) for w, box in k.boxes(SIZE)]
            assert [(p.pid, p.box) for p in got.persons[(k.shot, k.img)]] == [(w, tuple(b)) for w, b in want]
        shots = [s for sc in got.scenes for s in range(sc.first, sc.last + 1)]
        assert shots == list(range(len(world.story.shots)))
        assert [sc.places for sc in got.scenes] == [(s.place,) for s in world.story.scenes]


def test_keyframes_are_the_world_renders(release):
    out, _, bench = release
    it = bench.items[7]
    k = it.keyframe
    img = Image.open(out / f"keyframes/{k.film_id}/shot_{k.shot:04d}_img_{k.img}.jpg")
    assert img.size == (SIZE, SIZE) and img.mode == "RGB"
    diff = sum(abs(a - b) for p, q in zip(img.getdata(), k.image(SIZE).getdata()) for a, b in zip(p, q))
    assert diff / (SIZE * SIZE * 3) < 4  # JPEG quality 95


def test_queries_and_provenance_point_at_release_files(release):
    out, summary, bench = release
    rows = [json.loads(x) for x in (out / "world_queries.jsonl").read_text().splitlines()]
    assert len(rows) == 12 == summary["queries"]
    for r in rows:
        assert (out / r["reference"]).is_file() and all((out / g).is_file() for g in r["gt"])
        assert r["reference"] not in r["gt"] and r["actor"] not in r["edit"]
    prov = json.loads((out / "world_export.json").read_text())
    assert len(prov["items"]) == len(bench.items)


def test_a_bad_request_is_refused(tmp_path, capsys):
    assert main(["movienet-release", "--split", "train", "--out", str(tmp_path / "a")]) == 2
    assert main(["cirr", "--n-films", "2", "--out", str(tmp_path / "b")]) == 2
    assert "--n-films" in capsys.readouterr().err
