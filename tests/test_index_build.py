"""`python -m cir_core.index build`: sharded, resumable embedding; the prebuilt index folder the app
opens; Chord on an HNSW shortlist; torchrun on CPU; the ANN benchmark's helpers."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from cir_core.errors import GalleryError
from cir_core.index.build import build, main
from cir_core.index.prebuilt import is_prebuilt, open_prebuilt
from cir_core.index.shards import read_shard, shard_bounds, shard_path
from cir_core.search import Index, Queries, ScoreOpts, Searcher, gallery_norms, rank
from ui.settings import AppConfig

ROOT = Path(__file__).resolve().parents[1]
TINY = "cir-tiny-vit"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_ann", ROOT / "bench" / "bench_ann.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def photos(tmp_path):
    """10 small random-colour PNGs and one corrupt 'JPEG' (sorted ids: bad.jpg first)."""
    folder = tmp_path / "photos"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(10):
        Image.fromarray(rng.integers(0, 255, (24 + i, 32, 3), dtype=np.uint8)).save(folder / f"p{i:02d}.png")
    (folder / "bad.jpg").write_bytes(b"\xff\xd8 truncated, not a JPEG")
    return folder


def _build(photos, out, backbone, **kw):
    kw = {"batch_size": 3, "workers": 0, "shard_size": 4, "progress": False, **kw}
    return build(str(photos), backbone, None, out, **kw)


def test_build_skips_corrupt_image_and_app_uses_it_without_encoding(photos, tmp_path, tiny_backbone,
                                                                     one_thread, monkeypatch, capsys):
    out = tmp_path / "idx"
    assert main(["build", "--gallery", str(photos), "--backbone", TINY, "--out", str(out), "--workers", "1",
                 "--batch-size", "4", "--shard-size", "4", "--device", "cpu", "--quiet"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (printed["n"], printed["skipped"], printed["kind"]) == (10, 1, "flat")
    skipped = [json.loads(line) for line in (out / "skipped.jsonl").read_text().splitlines()]
    assert [s["id"] for s in skipped] == ["bad.jpg"] and "bad.jpg" in skipped[0]["error"]
    pre = open_prebuilt(out)
    assert pre.gallery.ids == [f"p{i:02d}.png" for i in range(10)]
    # Workers decode and preprocess exactly as Backbone.encode_images does.
    expected = tiny_backbone.encode_images([str(photos / i) for i in pre.gallery.ids])
    np.testing.assert_allclose(pre.embeddings, expected, atol=1e-5)

    from cir_core.engine import load_engine
    from cir_core.gallery import EmbeddingCache

    def no_encoding(*a, **k):
        raise AssertionError("the app re-encoded a prebuilt gallery")

    monkeypatch.setattr(EmbeddingCache, "embed", no_encoding)
    monkeypatch.setattr(Index, "build", classmethod(no_encoding))
    engine = load_engine(AppConfig(backbone=TINY, gallery=str(out), cache_dir=str(tmp_path / "c")))
    assert engine.searcher.kind == "exact" and pre.index is None  # its flat index.faiss is not loaded
    assert len(engine.view.gallery) == 10
    hits = engine.compare(engine.view.reference_from_id("p03.png"), "Make it blue.", k=3, methods=["sum"]).methods[0].hits
    assert len(hits) == 3
    with pytest.raises(GalleryError, match="was embedded with backbone 'cir-tiny-vit@random-seed0'"):
        pre.check_backbone(SimpleNamespace(id="ViT-L-14@openai", dim=768))


def test_interrupted_build_resumes_and_changed_image_reembeds_its_shard(photos, tmp_path, tiny_backbone, one_thread):
    out, seen = tmp_path / "idx", []

    def stop_after_two(shard):
        seen.append(shard.start)
        if len(seen) == 2:
            raise KeyboardInterrupt  # as if the user pressed Ctrl-C after two shards

    with pytest.raises(KeyboardInterrupt):
        _build(photos, out, tiny_backbone, on_shard=stop_after_two)
    assert not is_prebuilt(out) and sorted(os.listdir(out / "shards")) == ["shard-000000.npz", "shard-000001.npz"]
    seen.clear()
    meta = _build(photos, out, tiny_backbone, on_shard=lambda sh: seen.append(sh.start))
    assert seen == [8] and meta["n"] == 10 and meta["skipped"] == 1  # only the third shard was embedded
    whole = np.array(open_prebuilt(out).embeddings)
    fresh = _build(photos, tmp_path / "fresh", tiny_backbone)
    np.testing.assert_array_equal(whole, np.load(tmp_path / "fresh" / "embeddings.npy"))
    assert fresh["digest"] == meta["digest"]

    seen.clear()
    assert _build(photos, out, tiny_backbone, on_shard=lambda sh: seen.append(sh.start)) == meta and seen == []  # up to date
    Image.new("RGB", (30, 30), "red").save(photos / "p05.png")  # rows: bad, p00..p09 -> p05 is in shard 1
    (out / "shards" / "shard-000002.npz").write_bytes(b"truncated")  # a torn file is redone too
    _build(photos, out, tiny_backbone, on_shard=lambda sh: seen.append(sh.start))
    assert seen == [4, 8]
    assert not np.allclose(open_prebuilt(out).embeddings[5], whole[5])


def test_exact_max_switches_to_ann_and_reuses_the_shards(photos, tmp_path, tiny_backbone, one_thread):
    out, seen = tmp_path / "idx", []
    assert _build(photos, out, tiny_backbone, exact_max=10)["kind"] == "flat"  # 10 readable images: exact up to 10
    meta = _build(photos, out, tiny_backbone, exact_max=9, on_shard=lambda sh: seen.append(sh))
    assert meta["kind"] == "ivf-flat" and meta["ann"] == "ivf-flat" and seen == []  # re-indexed, nothing re-embedded
    assert open_prebuilt(out).index.kind == "ivf-flat"
    assert _build(photos, out, tiny_backbone, exact_max=9, ann="hnsw")["kind"] == "hnsw" and seen == []
    pre = open_prebuilt(out)
    assert pre.index.kind == "hnsw"
    _, ids = pre.index.search(np.asarray(pre.embeddings[:3]), 1)
    assert ids[:, 0].tolist() == [0, 1, 2]


@pytest.mark.parametrize("ann", ["hnsw", "ivf-flat"])
def test_chord_on_ann_shortlist_equals_exact_chord(ann):
    bench = _bench()
    rng = np.random.default_rng(0)
    g = bench.clustered_unit_vectors(3000, 32, 20, rng)
    q = bench.queries_near(g, 12, 0.5, rng)
    refs = rng.integers(0, len(g), 12)
    v_ref, q0 = g[refs], bench.queries_near(g[refs], 12, 0.3, rng)
    hnsw = Index.build(g, ann, hnsw_m=16, ef_search=256, nlist=16, nprobe=4)
    assert hnsw.kind == ann
    k, s = 10, 200
    chord = ScoreOpts("chord", 0.5)
    ex_s, ex_i = rank(Queries(q, q0, v_ref), Searcher.exact(g), chord, k, refs)
    _, short = hnsw.search(q, s + 1)
    # The premise: every query's true Chord top-k is inside its cosine shortlist.
    assert all(set(ex_i[i]) <= set(short[i]) for i in range(12))
    hn_s, hn_i = rank(Queries(q, q0, v_ref), Searcher(g, gallery_norms(g), index=hnsw, shortlist=s), chord, k, refs)
    np.testing.assert_array_equal(hn_i, ex_i)
    np.testing.assert_allclose(hn_s, ex_s, atol=1e-6)


@pytest.mark.slow  # two fresh processes import torch and open_clip: ~15 s on an idle machine
@pytest.mark.skipif(os.environ.get("CIR_SKIP_TORCHRUN") == "1", reason="CIR_SKIP_TORCHRUN=1")
def test_torchrun_two_cpu_processes_match_one(photos, tmp_path, tiny_backbone, one_thread):
    import torch.distributed

    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is unavailable")
    args = ["--gallery", str(photos), "--backbone", TINY, "--workers", "0", "--batch-size", "3",
            "--shard-size", "4", "--device", "cpu", "--quiet"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          "-m", "cir_core.index", "build", *args, "--out", str(tmp_path / "two")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1])["n"] == 10  # only rank 0 prints
    one = _build(photos, tmp_path / "one", tiny_backbone)
    two = open_prebuilt(tmp_path / "two")
    assert two.meta["digest"] == one["digest"] and two.gallery.ids == open_prebuilt(tmp_path / "one").gallery.ids
    np.testing.assert_allclose(two.embeddings, np.load(tmp_path / "one" / "embeddings.npy"), atol=1e-6)


def test_bad_inputs(tmp_path, photos, capsys):
    assert main(["build", "--gallery", str(tmp_path / "nope"), "--backbone", TINY, "--device", "cpu"]) == 2
    assert "neither an image folder nor a manifest" in capsys.readouterr().err
    with pytest.raises(GalleryError, match="not a finished index folder"):
        open_prebuilt(tmp_path)
    with pytest.raises(SystemExit):
        main(["build", "--gallery", str(photos)])  # --backbone is required


def test_shard_files_round_trip_and_reject_mismatches(tmp_path):
    from cir_core.index.shards import Shard, write_shard

    assert shard_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    sh = Shard(4, 8, np.array([4, 6, 7]), np.eye(3, 5, dtype=np.float32), [(5, "ImageLoadError: bad")],
               np.array([20.5, 19.0, 21.25], np.float32))
    p = shard_path(tmp_path, 1)
    write_shard(p, sh, "bb", ["a", "b", "c", "d"])
    back = read_shard(p, "bb", ["a", "b", "c", "d"], 5)
    assert back.rows.tolist() == [4, 6, 7] and back.errors == [(5, "ImageLoadError: bad")]
    np.testing.assert_array_equal(back.emb, sh.emb)
    np.testing.assert_array_equal(back.norms, sh.norms)
    assert read_shard(p, "other", ["a", "b", "c", "d"], 5) is None  # another backbone
    assert read_shard(p, "bb", ["a", "B", "c", "d"], 5) is None  # an image changed
    assert read_shard(p, "bb", ["a", "b", "c", "d"], 6) is None  # another dim
    assert read_shard(tmp_path / "missing.npz", "bb", [], 5) is None


def test_bench_helpers():
    bench = _bench()
    found = np.array([[1, 2, 3], [4, 5, 6]])
    truth = np.array([[1, 9], [4, 5]])
    assert bench.recall_within(found, truth) == pytest.approx((1 / 2 + 2 / 2) / 2)
    x = bench.clustered_unit_vectors(500, 16, 5, np.random.default_rng(0), chunk=128)
    assert x.shape == (500, 16) and x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1, atol=1e-5)
    np.testing.assert_array_equal(x, bench.clustered_unit_vectors(500, 16, 5, np.random.default_rng(0), chunk=128))
    q = bench.queries_near(x, 7, 0.0, np.random.default_rng(1))  # zero noise: queries are gallery rows
    assert ((q @ x.T).max(axis=1) > 1 - 1e-5).all()


def test_ivf_list_count_and_round_trip(tmp_path):
    from cir_core.search import ivf_lists

    # nearest power of two to 4 sqrt(n): 1264.9 -> 1024, 4000 -> 4096; capped at n // 39 (1000 -> 25)
    assert [ivf_lists(n) for n in (10, 1000, 100_000, 1_000_000)] == [1, 25, 1024, 4096]
    g = _bench().clustered_unit_vectors(2000, 16, 8, np.random.default_rng(0))
    ivf = Index.build(g, "ivf-flat", nprobe=5)
    assert (ivf.kind, ivf._index.nlist, ivf.ntotal) == ("ivf-flat", 51, 2000)
    ivf.save(tmp_path / "i.faiss")
    back = Index.load(tmp_path / "i.faiss")
    assert back.kind == "ivf-flat" and back._index.nprobe == 5
    np.testing.assert_array_equal(back.search(g[:4], 3)[1], ivf.search(g[:4], 3)[1])
