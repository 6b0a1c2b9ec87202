"""Milvus behind the searcher (issue 46), on Milvus Lite (in this process, a .db folder): the build
CLI writes a collection (resumably, the backbone checked), `--gallery milvus:COLLECTION@URI` opens
it, Compare on it equals Compare on the same gallery held in the process, the evaluation equals
the in-process exact one where the shortlist holds every row, pooling runs on it, and a dead or
wrong URI is one clear error. The browser and the RSS checks: tests/test_milvus_live.py."""
from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from cir_core.engine import load_engine  # noqa: E402
from cir_core.errors import GalleryError, InputError  # noqa: E402
from cir_core.index import milvus as mv  # noqa: E402
from cir_core.index.build import main as index_main  # noqa: E402
from cir_core.paths import DEFAULT_BACKBONE  # noqa: E402
from cir_core.settings import engine_config  # noqa: E402

EDIT = "Make the square blue. Add a star."


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """31 small PNGs (ids with an underscore and a quote) and one corrupt file."""
    folder = tmp_path_factory.mktemp("milvus") / "photos"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(30):
        Image.fromarray(rng.integers(0, 255, (40 + i, 48, 3), dtype=np.uint8)).save(folder / f"shot_{i:02d}.png")
    Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)).save(folder / 'say "cheese".png')
    (folder / "bad.jpg").write_bytes(b"\xff\xd8 truncated, not a JPEG")
    return folder


def build(photos: Path, uri: Path, *extra: str, collection: str = "photos") -> int:
    return index_main(["build", "--gallery", str(photos), "--backbone", DEFAULT_BACKBONE, "--backend", "milvus",
                       "--uri", str(uri), "--collection", collection, "--workers", "0", "--shard-size", "8",
                       "--device", "cpu", "--quiet", "--out", str(uri.parent / f"{collection}.shards"), *extra])


@pytest.fixture(scope="module")
def built(photos):
    """The photos in a Milvus Lite collection (HNSW) and in an index folder (exact), by the CLI."""
    uri = photos.parent / "g.db"
    assert build(photos, uri, "--milvus-index", "HNSW") == 0
    assert index_main(["build", "--gallery", str(photos), "--backbone", DEFAULT_BACKBONE, "--workers", "0",
                       "--device", "cpu", "--quiet", "--out", str(photos.parent / "idx")]) == 0
    return uri


@pytest.fixture(scope="module")
def engines(built, photos):
    """(the engine on the collection, the engine on the index folder)."""
    on_milvus = load_engine(engine_config(["--gallery", f"milvus:photos@{built}"]))
    here = load_engine(engine_config(["--gallery", str(photos.parent / "idx")]))
    return on_milvus, here


def test_compare_on_milvus_equals_the_in_process_search(engines):
    on_milvus, here = engines
    assert on_milvus.view.embeddings is None and on_milvus.view.store is not None  # no copy of the vectors
    assert on_milvus.searcher.kind == "approximate (Milvus HNSW)" and len(on_milvus.view) == 31
    ref = "shot_03.png"
    for scoring in ("cosine", "chord"):
        a = on_milvus.compare(on_milvus.view.reference_from_id(ref), EDIT, k=8, scoring=scoring)
        b = here.compare(here.view.reference_from_id(ref), EDIT, k=8, scoring=scoring)
        assert [m.name for m in a.methods] == [m.name for m in b.methods]
        for x, y in zip(a.methods, b.methods):
            assert x.ok and [h.item_id for h in x.hits] == [h.item_id for h in y.hits], (scoring, x.name)
            assert ref not in [h.item_id for h in x.hits]  # the reference's own row excluded
            np.testing.assert_allclose([h.score for h in x.hits], [h.score for h in y.hits], atol=1e-5)
        assert [[h.item_id for h in s.hits] for s in a.progression.steps] == \
               [[h.item_id for h in s.hits] for s in b.progression.steps]
        # the map of the neighbourhood reads its rows from the collection: the folder's map
        assert a.map is not None and b.map is not None
        assert [(p.kind, p.row, p.method) for p in a.map.points] == [(p.kind, p.row, p.method) for p in b.map.points]
        np.testing.assert_allclose([(p.x, p.y) for p in a.map.points], [(p.x, p.y) for p in b.map.points], atol=1e-4)
    # the explanation reads its rows from the collection once (hits' terms and map together), not
    # once per method and again for the map
    calls, store, reference = [], on_milvus.searcher.store, on_milvus.view.reference_from_id(ref)
    vectors = store.vectors
    store.vectors = lambda rows: calls.append(len(rows)) or vectors(rows)
    try:
        on_milvus.compare(reference, EDIT, k=8, scoring="chord")
    finally:
        del store.vectors
    assert len(calls) == 1 and calls[0] >= 8, calls
    # the build's index parameters reach Milvus Lite (pymilvus 3 flattens them; Lite reads them nested)
    info = on_milvus.view.store.client.describe_index("photos", "vector")
    assert info["params"] == {"M": 32, "efConstruction": 40}
    # the reference's vector and raw norm come from the collection, equal to the folder's
    ra, rb = on_milvus.view.reference_from_id(ref), here.view.reference_from_id(ref)
    np.testing.assert_array_equal(ra.embedding, rb.embedding)
    assert ra.norm == pytest.approx(rb.norm)


def test_the_gallery_reads_its_rows_from_the_collection(engines, photos):
    view = engines[0].view
    assert view.item_id(0) == "say \"cheese\".png" and view.row_of('say "cheese".png') == 0
    assert view.gallery.items[1].path == str((photos / "shot_00.png").resolve())
    assert list(view.search("shot_1")) == list(range(11, 21))  # '_' matched as itself, not any character
    assert list(view.search("SHOT_2 9")) == [30] and len(view.search("")) == 31
    assert view.thumbnail(1, 32).size[0] <= 32  # from the row's file
    with pytest.raises(InputError, match="no item 'nope.png'"):
        view.reference_from_id("nope.png")


def test_the_build_resumes_and_is_up_to_date_after(photos, tmp_path, monkeypatch, capsys):
    uri = tmp_path / "r.db"
    calls = []
    real = mv.MilvusTarget._insert

    def dies_on_the_third(self, *a, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, *a, **kw)

    monkeypatch.setattr(mv.MilvusTarget, "_insert", dies_on_the_third)
    monkeypatch.setattr(mv.MilvusTarget, "checkpoint_s", 0.0)  # record progress after every shard
    assert build(photos, uri, "--milvus-index", "FLAT") == 130
    client = mv.connect(str(uri))
    props = client.describe_collection("photos")["properties"]
    assert (props["cir.state"], props["cir.shards_done"]) == ("inserting", "2")
    client.close()
    with pytest.raises(GalleryError, match="its build has not finished"):
        load_engine(engine_config(["--gallery", f"milvus:photos@{uri}"]))
    calls.clear()
    assert build(photos, uri, "--milvus-index", "FLAT") == 0
    assert len(calls) == 2  # shards 3 and 4 only
    assert "resuming after 2 shard(s) (15 rows)" in capsys.readouterr().err
    client = mv.connect(str(uri))
    rows = client.query("photos", filter="row >= 0", output_fields=["row"], limit=100)
    assert sorted(r["row"] for r in rows) == list(range(31))  # each row once
    client.close()
    calls.clear()
    assert build(photos, uri, "--milvus-index", "FLAT") == 0 and calls == []
    assert "is up to date (31 rows, FLAT)" in capsys.readouterr().err
    assert json.loads((tmp_path / "photos.shards" / "skipped.jsonl").read_text())["id"] == "bad.jpg"


def test_another_backbone_is_refused_naming_both(built, photos, capsys):
    from cir_core.backbone import load_backbone

    other = load_backbone("cir-tiny-vit", pretrained=None, seed=1)
    cfg = engine_config(["--gallery", f"milvus:photos@{built}", "--backbone", "cir-tiny-vit"])
    with pytest.raises(GalleryError) as err:
        load_engine(cfg)
    assert "was embedded with backbone 'cir-tiny-rn@local:" in str(err.value)  # the shipped one's id
    assert "but the app runs 'cir-tiny-vit@random-seed0' (dim 256)" in str(err.value)
    target = mv.MilvusTarget(str(built), "photos")
    with pytest.raises(GalleryError, match=r"holds embeddings of backbone 'cir-tiny-rn@local:.*not "
                                           r"'cir-tiny-vit@random-seed1'.*--replace"):
        target.check(other)


def test_dead_uris_and_bad_names_are_one_clear_error(tmp_path, built):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for spec, why in [(f"milvus:g@http://127.0.0.1:{port}?timeout=2", "cannot reach Milvus at 'http://127.0.0.1:"),
                      (f"milvus:g@{tmp_path / 'none.db'}", "no Milvus Lite database at"),
                      (f"milvus:g@{tmp_path / 'x.sqlite'}", "a path ending in .db"),
                      (f"milvus:nope@{built}", "has no collection 'nope' \\(it has: photos\\)")]:
        with pytest.raises(GalleryError, match=why):
            load_engine(engine_config(["--gallery", spec]))
    with pytest.raises(InputError, match="Milvus Lite builds FLAT, IVF_FLAT, IVF_SQ8, HNSW, not DISKANN"):
        mv.MilvusTarget(str(tmp_path / "d.db"), "d", mv.MilvusIndex.from_flags("DISKANN")).check(None)


@pytest.mark.timeout(120)
def test_a_server_that_never_answers_fails_within_the_timeout(tmp_path):
    """Not a hang: a socket that accepts connections and says nothing (a half-dead server)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])  # accepted, never answered
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        spec = f"milvus:g@http://127.0.0.1:{srv.getsockname()[1]}?timeout=2"
        t0 = time.monotonic()
        with pytest.raises(GalleryError, match=r"cannot reach Milvus .*waited at most 2 s"):
            load_engine(engine_config(["--gallery", spec]))
        assert time.monotonic() - t0 < 60  # the pytest timeout above is the hang guard; this names it
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()


def test_evaluation_on_milvus_equals_the_in_process_exact_one(tmp_path, capsys):
    """A world val split of 12 queries (~100 images) in a FLAT collection whose shortlist (200)
    holds every row: every metric equals the exact in-process evaluation's."""
    from cir_core.eval.cli import main as eval_main

    uri = tmp_path / "w.db"
    assert index_main(["build", "--gallery", "world:val", "--world-queries", "12", "--backbone", DEFAULT_BACKBONE,
                       "--backend", "milvus", "--uri", str(uri), "--collection", "world_val", "--milvus-index",
                       "FLAT", "--workers", "0", "--device", "cpu", "--quiet", "--out", str(tmp_path / "sh")]) == 0
    common = ["--split", "val", "--n-queries", "12", "--methods", "sum,pact,dice,pace", "--cache-dir", str(tmp_path)]
    assert eval_main([*common, "--json", str(tmp_path / "here.json")]) == 0
    assert eval_main([*common, "--gallery", f"milvus:world_val@{uri}", "--json", str(tmp_path / "milvus.json")]) == 0
    here, there = (json.loads((tmp_path / f).read_text()) for f in ("here.json", "milvus.json"))
    assert here["results"] and here["results"] == there["results"]
    assert "search" not in here and "Milvus FLAT collection 'world-val-12'" in there["search"]
    assert "search: Milvus FLAT" in capsys.readouterr().out
    # a collection of another gallery is refused, naming the row where they part
    assert eval_main(["--split", "val", "--n-queries", "11", "--methods", "sum", "--gallery",
                      f"milvus:world_val@{uri}"]) == 2
    assert "items, the collection 'world-val-12'" in capsys.readouterr().err
    assert eval_main([*common, "--progression", "--gallery", f"milvus:world_val@{uri}"]) == 2
    assert "--progression ranks every target" in capsys.readouterr().err


def test_pooling_runs_on_milvus_from_a_queries_file(engines, tmp_path):
    from db.migrate import init_db
    from db.models import RetrievedItem
    from db.pooling import file_queries, pool_query_set
    from db.sqlite import open_db, session_factory

    qfile = tmp_path / "q.jsonl"
    qfile.write_text(json.dumps({"id": "a", "reference_id": "shot_04.png", "edit": EDIT, "film": "x"}) + "\n"
                     + json.dumps({"reference_id": "shot_09.png", "edit": "Make it red."}) + "\n")
    queries = file_queries(qfile)
    assert [(q.external_id, q.meta) for q in queries] == [("a", {"film": "x"}), ("q2", {})]
    eng = open_db(str(tmp_path / "ann.sqlite"))
    init_db(eng)
    with session_factory(eng)() as s:
        qs = pool_query_set(s, engines[0], "milvus-set", queries, ["pact", "sum"], k=3)
        items = s.query(RetrievedItem).filter(RetrievedItem.query_id.in_([q.id for q in qs.queries])).all()
        assert len(items) == 2 * 2 * 2 * 3 and qs.meta["gallery"] == "photos"
        assert {i.item_id for i in items} <= {f"shot_{i:02d}.png" for i in range(30)} | {'say "cheese".png'}
    bad = tmp_path / "bad.csv"
    bad.write_text("reference_id,edit\nshot_01.png,\n")
    with pytest.raises(ValueError, match="bad.csv' line 2: no 'edit'"):
        file_queries(bad)


def test_a_milvus_gallery_shows_a_hub_gallerys_pictures(tmp_path, monkeypatch):
    """A Space has no local files: the collection (built from the frames) shows its rows through
    the Hub gallery pushed from the same frames, thumbnails at start-up, a frame when opened."""
    from _fake_hub import write_frames

    from cir_core.hub.gallery import push_gallery
    from cir_core.imageio import load_image
    from cir_core.storage import FolderStore

    source = write_frames(tmp_path / "frames", 12)
    hub = tmp_path / "hub"
    done = push_gallery(str(source), "org/frames", backbones=[(DEFAULT_BACKBONE, None)], work=tmp_path / "work",
                        tag="v1", backend=FolderStore(hub, hub / ".cache"), progress=False, workers=0, device="cpu")
    uri = tmp_path / "f.db"
    assert index_main(["build", "--gallery", str(source), "--backbone", DEFAULT_BACKBONE, "--backend", "milvus",
                       "--uri", str(uri), "--collection", "frames", "--workers", "0", "--device", "cpu", "--quiet",
                       "--out", str(tmp_path / "sh")]) == 0
    monkeypatch.setenv("CIR_LOCAL_HUB", str(hub))
    for frame in (tmp_path / "frames").rglob("*.jpg"):  # the Space has none of the files
        frame.unlink()
    eng = load_engine(engine_config(["--gallery", f"milvus:frames@{uri}?images=hf:org/frames@v1"]))
    fetched = lambda: sorted(p.name for p in (hub / ".cache").rglob("shot_*.jpg"))  # noqa: E731
    row = eng.view.row_of("film1/shot_0003.jpg")
    assert max(eng.view.thumbnail(row, 64).size) == 64 and fetched() == []  # the Hub's thumbnail only
    full = eng.view.image(row, 512)  # larger than a thumbnail: the frame, fetched now
    pushed = hub / "datasets" / "org" / "frames" / "commits" / done.commit / "frames" / "film1" / "shot_0003.jpg"
    assert fetched() == ["shot_0003.jpg"] and np.array_equal(np.asarray(full), np.asarray(load_image(pushed)))
    res = eng.compare(eng.view.reference_from_row(row), EDIT, k=3)
    assert all(m.ok and len(m.hits) == 3 for m in res.methods)
    with pytest.raises(GalleryError, match="images='movienet:/x': the rows' pictures come from a Hub gallery"):
        load_engine(engine_config(["--gallery", f"milvus:frames@{uri}?images=movienet:/x"]))
