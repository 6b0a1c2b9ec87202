"""The Annotate tab on a MovieNet set, in headless Chromium: the reference frame shows the
character's body box (and name), the candidate shows none. The set is built by the MovieNet
builder from hand-written release files; skipped when /usr/bin/chromium is absent."""
from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
from _movienet_fixtures import write_small_set
from PIL import Image
from test_app_live import CHROMIUM, CHROMIUM_ARGS, _free_port

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} absent")


def amber_share(png: bytes) -> float:
    """The share of a screenshot's pixels in the box's amber (JPEG and scaling blur it a little)."""
    a = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    r, g, b = a[..., 0], a[..., 1], a[..., 2]
    return float(((r > 200) & (g > 150) & (g < 235) & (b < 90)).mean())


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from cir_core.benchmarks import load_movienet_queryset
    from cir_core.engine import load_engine
    from db.migrate import init_db
    from db.pooling import movienet_queries, pool_query_set
    from db.sqlite import open_db, session_factory
    from ui import build_demo, launch_kwargs
    from ui.settings import AppConfig

    root = tmp_path_factory.mktemp("annotate-movienet")
    write_small_set(root, (320, 180), 8, "Put them on a beach.")
    users = root / "users.txt"
    users.write_text("alice:wonderland\n")
    cfg = AppConfig(gallery=f"movienet:{root / 'set'}", backbone="cir-tiny-vit", methods=("sum", "text-only"),
                    cache_dir=str(root / "cache"), host="127.0.0.1", port=_free_port(),
                    db=str(root / "ann.sqlite"), annotators=str(users))
    engine = load_engine(cfg, progress_cb=None)
    db = open_db(cfg.db)
    init_db(db)
    with session_factory(db)() as s:
        raw = load_movienet_queryset(root / "set")[0]
        pool_query_set(s, engine, "mn", movienet_queries(engine, raw), ["sum", "text-only"], ["cosine"], k=3)
    db.dispose()
    demo = build_demo(cfg, engine=engine)
    demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs(cfg))
    try:
        yield demo, root
    finally:
        demo.close()


def test_the_reference_shows_the_characters_box_and_the_candidate_none(app) -> None:
    from playwright.sync_api import expect, sync_playwright

    demo, root = app
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.goto(demo.local_url)
            page.locator("input[type=password]").first.wait_for(timeout=60_000)
            page.locator("input:not([type=password]):not([type=hidden])").first.fill("alice")
            page.locator("input[type=password]").first.fill("wonderland")
            page.keyboard.press("Enter")
            page.get_by_role("tab", name="Annotate").click()
            expect(page.locator("#ann-status")).to_contain_text("Signed in as alice", timeout=90_000)
            expect(page.locator("#ann-edit")).to_contain_text("boxed in amber on the reference")
            who = page.locator("#ann-edit").inner_text()
            assert "Jack" in who or "Rose" in who  # the meta's character name
            for img in ("#ann-ref", "#ann-cand"):
                page.wait_for_function(f"document.querySelector('{img}') && "
                                       f"document.querySelector('{img}').naturalWidth > 0", timeout=30_000)
            page.screenshot(path=str(root / "annotate-movienet.png"), full_page=True)
            ref, cand = page.locator("#ann-ref").screenshot(), page.locator("#ann-cand").screenshot()
            assert amber_share(ref) > 0.01, "no box on the reference"
            assert amber_share(cand) == 0.0, "a box on the candidate"
            page.locator("body").click(position={"x": 5, "y": 5})  # focus the page, not a textbox
            page.keyboard.press("1")  # the next pair: still a box on the reference only
            expect(page.locator("#ann-status")).to_contain_text("Now the edit question", timeout=60_000)
            page.keyboard.press("q")
            expect(page.locator("#ann-status")).to_contain_text("pair #2", timeout=60_000)
            page.wait_for_function("document.querySelector('#ann-cand').complete", timeout=30_000)
            assert amber_share(page.locator("#ann-ref").screenshot()) > 0.01
            assert amber_share(page.locator("#ann-cand").screenshot()) == 0.0
        finally:
            browser.close()
    if os.environ.get("CIR_SAVE_SCREENSHOTS"):  # docs/img/annotate_movienet.png is made this way
        Path(os.environ["CIR_SAVE_SCREENSHOTS"]).write_bytes((root / "annotate-movienet.png").read_bytes())
