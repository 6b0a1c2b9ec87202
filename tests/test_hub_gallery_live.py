"""`python app.py --gallery hf:org/name@v1` in a browser: a gallery pushed by `push gallery` to a
folder remote, served over HTTP by a stand-in for the Hub, pulled by the real huggingface_hub
client into its real cache layout. The page shows the gallery's thumbnails before any frame is
downloaded, and a click on one opens the full frame (fetched then, and only that one)."""
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_app_live import CHROMIUM, CHROMIUM_ARGS

ROOT = Path(__file__).resolve().parents[1]
N = 30


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} absent: install Debian's chromium")
def test_app_opens_a_hub_gallery_shows_thumbnails_and_opens_a_frame(tmp_path):
    from _fake_hub import FakeHub, write_frames
    from playwright.sync_api import expect, sync_playwright

    from cir_core.hub.gallery import push_gallery
    from cir_core.paths import DEFAULT_BACKBONE
    from cir_core.storage import FolderStore

    src = write_frames(tmp_path / "frames", N)
    done = push_gallery(str(src), "org/frames", backbones=[(DEFAULT_BACKBONE, None)], work=tmp_path / "work",
                        tag="v1", backend=FolderStore(tmp_path / "remote", tmp_path / "unused"), progress=False,
                        workers=0, device="cpu")
    cache, port = tmp_path / "hf-cache", _free_port()
    with FakeHub(tmp_path / "remote") as hub:
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "CIR_LOCAL_HUB")}
        env.update(HF_ENDPOINT=hub.url, HF_HUB_CACHE=str(cache), CIR_CACHE_DIR=str(tmp_path / "cir"),
                   CIR_DB=str(tmp_path / "db.sqlite"), GRADIO_ANALYTICS_ENABLED="False")
        log = open(tmp_path / "app.log", "w")
        app = subprocess.Popen([sys.executable, "app.py", "--gallery", "hf:org/frames@v1", "--host", "127.0.0.1",
                                "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_for(port, app, tmp_path / "app.log")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    page = browser.new_page(viewport={"width": 1440, "height": 1000})
                    page.goto(f"http://127.0.0.1:{port}/")
                    thumbs = page.locator("#ref-browser .thumbnail-item img")
                    expect(thumbs.nth(23)).to_be_visible(timeout=120_000)  # a full first page of 24
                    expect(page.locator("#banner")).to_contain_text("frames (30 images")
                    widths = [thumbs.nth(i).evaluate("img => img.naturalWidth") for i in range(24)]
                    assert 0 < max(widths) <= 128  # the gallery's thumbnails, not its frames
                    assert not [f for _, f in hub.files if f.startswith("frames/")]  # no frame fetched yet
                    thumbs.nth(5).click()
                    want = "film1/shot_0005.jpg"
                    expect(page.locator("#ref-id input, #ref-id textarea")).to_have_value(want, timeout=30_000)
                    preview = page.locator("#ref-preview img")
                    expect(preview).to_be_visible(timeout=30_000)
                    page.wait_for_function("() => document.querySelector('#ref-preview img')?.naturalWidth > 0")
                    assert preview.evaluate("img => img.naturalWidth") == 200  # the full 200 x 150 frame
                finally:
                    browser.close()
        finally:
            app.terminate()
            app.wait(timeout=60)
            log.close()
        assert [f for m, f in hub.files if f.startswith("frames/") and m == "GET"] == [f"frames/{want}"]
    snap = cache / "datasets--org--frames" / "snapshots" / done.commit
    assert (cache / "datasets--org--frames" / "refs" / "v1").read_text() == done.commit
    frame = snap / "frames" / want
    assert frame.is_symlink() and frame.resolve().parent.name == "blobs"
    assert not (snap / "frames" / "film0" / "shot_0004.jpg").exists()


def _wait_for(port: int, app: subprocess.Popen, log: Path, timeout: float = 180) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if app.poll() is not None:
            raise AssertionError(f"app.py exited with {app.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"app.py did not listen within {timeout} s:\n{log.read_text()[-3000:]}")
