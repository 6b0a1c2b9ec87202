"""The launched app on 127.0.0.1: through gradio_client, and end to end in headless Chromium.

The browser test drives Debian's `chromium` (`apt-get install -y chromium`) with Playwright's
Python API and never lets Playwright download a browser; it is skipped when /usr/bin/chromium is
absent. (docs/img/compare.png comes from tests/test_walkthrough.py, on the shipped assets.)
"""
import os
import socket

import pytest
from _cir_fakes import N_QUERIES, fake_trained_methods, make_test_engine

from ui import build_demo, launch_kwargs
from ui.settings import AppConfig

EDIT = "Make the square blue. Move the character to the left."
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
COLUMNS = ["pact", "dice", "pace", "compose-only"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app():
    with fake_trained_methods():
        engine = make_test_engine()
        engine.methods.available()  # build the methods while the fakes are registered
    cfg = AppConfig(world_queries=N_QUERIES, host="127.0.0.1", port=_free_port())
    demo = build_demo(cfg, engine=engine)
    demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs(cfg))
    try:
        yield demo, engine
    finally:
        demo.close()


def test_gradio_client_compare(app, tmp_path):
    from gradio_client import Client, handle_file

    demo, engine = app
    client = Client(demo.local_url, verbose=False)
    ref = engine.view.item_id(3)
    res = client.predict(ref, EDIT, 4, "chord", None, None, api_name="/compare")
    assert [m["name"] for m in res["methods"]] == [*COLUMNS, "sum"]
    for m in res["methods"]:
        assert m["error"] is None and len(m["hits"]) == 4, m["name"]
        assert all(h["item_id"] != ref for h in m["hits"])
    prog = res["progression"]
    assert prog["method"] == "pace" and len(prog["steps"]) == 2 == len(res["sentences"])
    assert res["reference"]["item_id"] == ref and res["timings"]["total"] > 0
    # an upload through the API, and a user error as a message
    path = tmp_path / "ref.png"
    engine.view.image(3, 100).save(path)
    up = client.predict("", "Add a red star.", 2, "cosine", None, handle_file(str(path)),
                        api_name="/compare")
    assert up["reference"]["kind"] == "upload" and len(up["methods"][0]["hits"]) == 2
    assert "empty" in client.predict(ref, "  ", 4, "cosine", None, None, api_name="/compare")["error"]
    # the Compare button's own event: five columns of galleries and one row per sentence; the
    # optional methods' columns (the other baselines here) stay hidden and empty unless asked for
    from cir_core.engine import MAX_STEPS
    from cir_core.methods import optional_methods

    extra = optional_methods()
    n, n_all = len(COLUMNS) + 1, len(COLUMNS) + 1 + len(extra)
    out = client.predict(ref, None, EDIT, 4, "Cosine", True, 0.34, [], api_name="/compare_view")
    gals = [g["value"] if isinstance(g, dict) else g for g in out[2 + n_all:2 + 2 * n_all]]
    assert [len(g) for g in gals] == [4] * n + [0] * len(extra)
    first_step = 3 + 2 * n_all + MAX_STEPS
    steps = [g["value"] if isinstance(g, dict) else g for g in out[first_step:first_step + MAX_STEPS]]
    assert [bool(g) for g in steps] == [True, True] + [False] * (MAX_STEPS - 2)
    out = client.predict(ref, None, EDIT, 4, "Cosine", True, 0.34, [extra[0]], api_name="/compare_view")
    gals = [g["value"] if isinstance(g, dict) else g for g in out[2 + n_all:2 + 2 * n_all]]
    assert [len(g) for g in gals] == [4] * (n + 1) + [0] * (len(extra) - 1)
    assert extra[0] in str(out[2 + n]) or "only" in str(out[2 + n]).lower()  # its column header
    api = client.predict(ref, EDIT, 3, "cosine", None, None, ",".join(["pact", *extra]), api_name="/compare")
    assert [m["name"] for m in api["methods"]] == ["pact", *extra]
    assert "unknown method" in client.predict(ref, EDIT, 3, "cosine", None, None, "nope", api_name="/compare")["error"]


def test_the_api_says_what_it_changed(app):
    """A k or λ out of range and an edit over the limit are used clamped / cut, and `notes` says so."""
    from gradio_client import Client

    demo, engine = app
    client = Client(demo.local_url, verbose=False)
    ref = engine.view.item_id(3)
    low = client.predict(ref, EDIT, 0, "chord", 5, None, api_name="/compare")
    assert low["k"] == 1 and low["lam"] == 1.0 and len(low["methods"][0]["hits"]) == 1
    assert "k = 0 is outside 1–50: 1 was used." in low["notes"] and "λ = 5 is outside 0–1: 1 was used." in low["notes"]
    high = client.predict(ref, "Make it blue. " * 400, 1000, "chord", -1, None, api_name="/compare")
    assert high["k"] == 50 and high["lam"] == 0.0 and len(high["edit"]) <= 2000
    assert "k = 1000 is outside 1–50: 50 was used." in high["notes"] and "λ = -1 is outside 0–1: 0 was used." in high["notes"]
    assert any("5,599 characters; the limit is 2,000" in n for n in high["notes"])
    assert client.predict(ref, EDIT, 8, "cosine", None, None, api_name="/compare")["notes"] == []


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} absent: install Debian's "
                    "chromium (apt-get install -y chromium) to run the browser test")
def test_browser_end_to_end(app, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    demo, engine = app
    shot = tmp_path / "compare.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(demo.local_url)
            thumbs = page.locator("#ref-browser .thumbnail-item")
            expect(thumbs.nth(23)).to_be_visible(timeout=60_000)  # a full first page of 24
            thumbs.nth(5).click()
            expect(page.locator("#ref-id input, #ref-id textarea")).to_have_value(engine.view.item_id(5),
                                                                                 timeout=20_000)
            page.locator("#edit-text textarea").fill(EDIT)
            page.locator("#compare-btn").click()
            for name in COLUMNS:
                expect(page.locator(f"#col-{name} .thumbnail-item")).to_have_count(8, timeout=60_000)
            expect(page.locator("#prog-step-1 .thumbnail-item")).to_have_count(8)
            expect(page.locator("#prog-step-2 .thumbnail-item")).to_have_count(8)
            assert page.locator(".prog-gallery:visible").count() == 2
            expect(page.locator("#compare-timings")).to_contain_text("total")
            expect(page.locator("#compare-status")).to_contain_text(engine.view.item_id(5))
            page.wait_for_timeout(500)  # let the last thumbnails paint
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
