"""The README walk-through, exactly, on the shipped assets: `python app.py` in a fresh cache
directory, the first gallery image, the README's edit, Compare — in headless Chromium; then the
map of the neighbourhood under the results and the Chord breakdown of the ground truth PACT found.

Nothing is faked: the shipped backbone, checkpoints and gallery embeddings. The time from
starting the process to the first Compare answer is printed (measured properly, with spread, by
bench/bench_first_start.py), never asserted. CIR_UPDATE_SCREENSHOT=1 copies the page's screenshot
to docs/img/compare.png and the open preview's to docs/img/compare-why.png (docs/APP.md shows both).
"""
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EDIT = "Make the square blue. Move the character to the left."
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
COLUMNS = ["pact", "dice", "pace", "compose-only", "sum"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(cache: Path, port: int, *args: str) -> subprocess.Popen:
    """`python app.py` as the README runs it, on `port`, with a fresh embedding cache."""
    env = {**os.environ, "CIR_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
    return subprocess.Popen([sys.executable, "app.py", "--host", "127.0.0.1", "--port", str(port), *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for_server(proc: subprocess.Popen, port: int, timeout: float = 240.0) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"app.py exited with {proc.returncode}:\n{proc.stdout.read()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError("the app did not start listening")


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} absent: install Debian's "
                    "chromium (apt-get install -y chromium) to run the browser test")
@pytest.mark.skipif(not (ROOT / "assets" / "backbone" / "cir-tiny-vit" / "open_clip_config.json").is_file(),
                    reason="the shipped backbone is not built")
def test_readme_walkthrough_on_the_shipped_assets(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    port, t0 = _free_port(), time.monotonic()
    proc = start_app(tmp_path / "cache", port)
    try:
        wait_for_server(proc, port)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1440, "height": 1000})
                page.goto(f"http://127.0.0.1:{port}/")
                first = page.locator("#ref-browser .thumbnail-item").first
                expect(first).to_be_visible(timeout=120_000)
                first.click()
                expect(page.locator("#ref-id input, #ref-id textarea")).not_to_have_value("", timeout=20_000)
                page.locator("#edit-text textarea").fill(EDIT)
                page.locator("#compare-btn").click()
                for name in COLUMNS:
                    expect(page.locator(f"#col-{name} .thumbnail-item")).to_have_count(8, timeout=120_000)
                answered = time.monotonic() - t0
                expect(page.locator("#prog-step-2 .thumbnail-item")).to_have_count(8)
                assert page.locator(".prog-gallery:visible").count() == 2  # two sentences, two steps
                expect(page.locator("#compare-status")).to_contain_text("ground-truth")
                captions = " ".join(page.locator(".result-gallery .caption-label").all_inner_texts())
                assert "✓ target" in captions and "(same)" in captions  # framed target, named character
                # why: the map of the neighbourhood under the results (issue 44)
                expect(page.locator("#why-map svg.why-map-svg")).to_be_visible()
                if os.environ.get("CIR_UPDATE_SCREENSHOT"):
                    page.wait_for_timeout(1000)  # let the last thumbnails paint
                    page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
                    shutil.copy(tmp_path / "compare.png", ROOT / "docs" / "img" / "compare.png")
                # ... and a result's Chord breakdown in its preview: the ground truth in PACT's column
                target = page.locator("#col-pact .thumbnail-item", has_text="✓ target").first
                target.click()
                info = page.locator("#result-preview-info")
                expect(info).to_contain_text("Why here", timeout=20_000)
                expect(info).to_contain_text("under cosine")
                if os.environ.get("CIR_UPDATE_SCREENSHOT"):
                    page.wait_for_function("document.querySelector('#result-preview-image img')?.complete", timeout=20_000)
                    page.wait_for_timeout(500)
                    page.locator("#result-preview").screenshot(path=str(tmp_path / "compare-why.png"))
                    shutil.copy(tmp_path / "compare-why.png", ROOT / "docs" / "img" / "compare-why.png")
            finally:
                browser.close()
        print(f"\npython app.py -> first Compare answer in the browser: {answered:.1f} s")
        assert not any((tmp_path / "cache").rglob("embeddings.npy")), "the shipped embeddings were not used"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
