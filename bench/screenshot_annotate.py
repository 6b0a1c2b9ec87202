"""A screenshot of the Annotate tab as an annotator sees it, from a pooled set (docs/img/).

    python bench/screenshot_annotate.py --gallery movienet:SET --db ann.sqlite --out annotate.png [--set NAME]
    python bench/screenshot_annotate.py --gallery world --out annotate.png   # a fresh database: the demo set

Starts `python app.py` on a copy of the database (the original is never written) with one
throwaway annotator, signs in through headless Chromium, opens the Annotate tab and saves the
page. Where the set marks the character (a MovieNet set: "boxed in amber on the reference"), it
also checks what the screenshot is for: the reference carries the amber box, the candidate none
(the share of amber pixels of each is printed); exit 1 when that fails.
Needs Debian's chromium and the playwright package (requirements-dev.txt).
"""
from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench_first_start import free_port, wait_listening  # noqa: E402  (bench/ is this script's folder)

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def amber_share(png: bytes) -> float:
    """The share of pixels in the character box's amber (as tests/test_annotate_movienet_live.py)."""
    import numpy as np
    from PIL import Image

    a = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    r, g, b = a[..., 0], a[..., 1], a[..., 2]
    return float(((r > 200) & (g > 150) & (g < 235) & (b < 90)).mean())


def shoot(url: str, out: Path, set_name: str | None, width: int) -> tuple[bool, float, float]:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_context(viewport={"width": width, "height": 1000}).new_page()
            page.goto(url)
            page.locator("input[type=password]").first.wait_for(timeout=120_000)
            page.locator("input:not([type=password]):not([type=hidden])").first.fill("reviewer")
            page.locator("input[type=password]").first.fill("screenshot-only")
            page.keyboard.press("Enter")
            page.get_by_role("tab", name="Annotate").click()
            expect(page.locator("#ann-status")).to_contain_text("Signed in as reviewer", timeout=180_000)
            if set_name:
                expect(page.locator("#ann-status")).to_contain_text(f"set {set_name}", timeout=60_000)
            for img in ("#ann-ref", "#ann-cand"):
                page.wait_for_function(f"document.querySelector('{img}') && "
                                       f"document.querySelector('{img}').naturalWidth > 0", timeout=60_000)
            expect(page.locator("#banner")).to_contain_text("Backbone", timeout=180_000)  # loaded
            page.screenshot(path=str(out), full_page=True)
            marked = "boxed in amber" in page.locator("#ann-edit").inner_text()
            return (marked, amber_share(page.locator("#ann-ref").screenshot()),
                    amber_share(page.locator("#ann-cand").screenshot()))
        finally:
            browser.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gallery", required=True)
    ap.add_argument("--db", type=Path, help="a pooled database, copied (default: a fresh one, the demo set)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--set", help="the query set the annotator is on (default: the first)")
    ap.add_argument("--width", type=int, default=1400)
    a = ap.parse_args()
    if a.db is not None and not a.db.is_file():
        raise SystemExit(f"no database {a.db}")
    with tempfile.TemporaryDirectory(prefix="cir-shot-") as tmp:
        db = Path(tmp) / "ann.sqlite"
        if a.db is not None:
            shutil.copyfile(a.db, db)
        users = Path(tmp) / "annotators.txt"
        users.write_text("reviewer:screenshot-only\n")
        port = free_port()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
        cmd = [sys.executable, "app.py", "--gallery", a.gallery, "--db", str(db), "--annotators", str(users),
               "--port", str(port), "--host", "127.0.0.1"]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_listening(proc, port)
            marked, ref, cand = shoot(f"http://127.0.0.1:{port}/", a.out, a.set, a.width)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    if not marked:
        print(f"{a.out}: saved (this set marks no character, so no box to check)")
        return 0
    ok = ref > 0.01 and cand == 0.0
    print(f"{a.out}: amber share reference {ref:.4f}, candidate {cand:.4f} -> "
          f"{'box on the reference only' if ok else 'CHECK FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
