"""A Milvus gallery served by another process (`python -m milvus_lite server`, the Milvus
protocol on a port, as a Milvus server would be): the build CLI writes the collection, `python
app.py --gallery milvus:photos@http://...` answers Compare in headless Chromium, and the app's
memory does not grow with the collection (the vectors stay in the server)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from test_app_live import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from test_hub_gallery_live import _wait_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EDIT = "Make the square blue. Move the character to the left."
COLUMNS = ["pact", "dice", "pace", "compose-only"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A Milvus Lite server in its own process: its URI."""
    from cir_core.index.milvus import connect

    folder = tmp_path_factory.mktemp("milvus-server")
    port = _free_port()
    log = open(folder / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(folder / "srv.db"),
                             "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    uri = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 60
        while True:
            try:
                connect(uri, timeout=2).close()
                break
            except Exception:  # noqa: BLE001 - not up yet
                if proc.poll() is not None or time.monotonic() > end:
                    raise AssertionError((folder / "server.log").read_text()[-2000:]) from None
                time.sleep(0.3)
        yield uri
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} absent: install Debian's chromium")
def test_compare_in_the_browser_on_a_milvus_gallery_built_by_the_cli(server, tmp_path):
    from PIL import Image
    from playwright.sync_api import expect, sync_playwright

    from cir_core.paths import DEFAULT_BACKBONE

    photos = tmp_path / "photos"
    photos.mkdir()
    rng = np.random.default_rng(1)
    for i in range(40):
        Image.fromarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(photos / f"frame_{i:03d}.png")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
    built = subprocess.run([sys.executable, "-m", "cir_core.index", "build", "--gallery", str(photos), "--backbone",
                            DEFAULT_BACKBONE, "--backend", "milvus", "--uri", server, "--collection", "photos",
                            "--milvus-index", "HNSW", "--workers", "0", "--device", "cpu", "--quiet"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    assert json.loads(built.stdout.strip().splitlines()[-1])["gallery"] == f"milvus:photos@{server}"
    port = _free_port()
    env.update(CIR_CACHE_DIR=str(tmp_path / "cache"), CIR_DB=str(tmp_path / "db.sqlite"))
    log = open(tmp_path / "app.log", "w")
    app = subprocess.Popen([sys.executable, "app.py", "--gallery", f"milvus:photos@{server}", "--host", "127.0.0.1",
                            "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for(port, app, tmp_path / "app.log")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 1000})
                page.goto(f"http://127.0.0.1:{port}/")
                thumbs = page.locator("#ref-browser .thumbnail-item")
                expect(thumbs.nth(23)).to_be_visible(timeout=120_000)  # a full first page of 24
                expect(page.locator("#banner")).to_contain_text("photos (40 images; approximate (Milvus HNSW) search)")
                thumbs.nth(5).click()
                expect(page.locator("#ref-id input, #ref-id textarea")).to_have_value("frame_005.png", timeout=30_000)
                page.locator("#edit-text textarea").fill(EDIT)
                page.locator("#compare-btn").click()
                for name in COLUMNS:
                    expect(page.locator(f"#col-{name} .thumbnail-item")).to_have_count(8, timeout=120_000)
                expect(page.locator("#prog-step-1 .thumbnail-item")).to_have_count(8)
                expect(page.locator("#prog-step-2 .thumbnail-item")).to_have_count(8)
                expect(page.locator("#compare-status")).to_contain_text("frame_005.png")
                # the browser's search box asks the collection
                page.locator("#ref-search input, #ref-search textarea").fill("frame_03")
                page.keyboard.press("Enter")
                expect(thumbs).to_have_count(10, timeout=30_000)
            finally:
                browser.close()
    finally:
        app.terminate()
        app.wait(timeout=60)
        log.close()


CHILD = textwrap.dedent("""
    import gc, json, sys
    import numpy as np
    from cir_core.engine import load_engine
    from cir_core.search import StoreArray
    from cir_core.settings import engine_config

    def rss():  # resident bytes now
        return int(open("/proc/self/statm").read().split()[1]) * 4096

    eng = load_engine(engine_config(["--gallery", f"milvus:{sys.argv[2]}@{sys.argv[1]}", "--backbone", "cir-tiny-vit",
                                     "--methods", "sum"]))
    for row in (5, 17, 123):
        for scoring in ("cosine", "chord"):
            res = eng.compare(eng.view.reference_from_row(row), "Make the square blue.", k=8, scoring=scoring)
            assert len(res.methods[0].hits) == 8
    gc.collect()
    out = {"rss": rss(), "rows": len(eng.view)}
    # the instrument sees vectors held in the process: the collection's, read into it
    held = StoreArray(eng.view.store)[np.arange(len(eng.view))]
    out["holding"], out["held_bytes"] = rss(), held.nbytes
    print(json.dumps(out))
""")


@pytest.mark.slow
def test_the_apps_memory_does_not_grow_with_the_collection(server, tmp_path):
    """Two collections, 2,000 and 100,000 vectors of 256 floats (102 MB more), in the server's
    process; an app-side engine opens each and answers Compare. Its resident memory grows by far
    less than the vectors would take (and does grow by them when they are read into it)."""
    from cir_core.backbone import load_backbone
    from cir_core.gallery import Gallery, GalleryItem
    from cir_core.index.milvus import MilvusIndex, MilvusTarget
    from cir_core.index.shards import Shard

    bb = load_backbone("cir-tiny-vit", pretrained=None, seed=0)
    rng = np.random.default_rng(0)
    for name, n in (("small", 2_000), ("large", 100_000)):
        items = [GalleryItem(f"{name}/{i:06d}", None, {"fingerprint": f"{name}-{i}"}) for i in range(n)]
        size = 10_000
        shards = []
        for a in range(0, n, size):
            e = rng.standard_normal((min(size, n - a), bb.dim), dtype=np.float32)
            e /= np.linalg.norm(e, axis=1, keepdims=True)
            shards.append(Shard(a, a + len(e), np.arange(a, a + len(e)), e, [], np.ones(len(e), np.float32)))
        target = MilvusTarget(server, name, MilvusIndex.from_flags("IVF_FLAT", nlist=64, nprobe=8))
        target.check(bb)
        record = {"source": name, "source_kind": "manifest", "name": name, "digest": name, "image_size": 64,
                  "world_queries": 0, "skipped": 0}
        target.write(Gallery(name, items), [it.meta["fingerprint"] for it in items], lambda s, sh=shards: sh[s],
                     [len(s.rows) for s in shards], bb, record, progress=False)
        target.client.close()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
    got = {}
    for name in ("small", "large"):  # one app-side process each, the same code path
        run = subprocess.run([sys.executable, "-c", CHILD, server, name], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        got[name] = json.loads(run.stdout.strip().splitlines()[-1])
    print(json.dumps(got))  # the measured figures, for -s
    assert (got["small"]["rows"], got["large"]["rows"]) == (2_000, 100_000)
    vectors = (100_000 - 2_000) * bb.dim * 4  # what holding the large collection would add: 100 MB
    grew = got["large"]["rss"] - got["small"]["rss"]
    assert grew < vectors / 4, f"the app grew by {grew / 1e6:.1f} MB with the large collection"
    large = got["large"]
    assert large["holding"] - large["rss"] > 0.8 * large["held_bytes"]  # and the instrument would see it
