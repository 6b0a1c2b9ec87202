"""Accessibility of the Compare and Figures screens (issue 44), checked with axe-core (vendored,
tests/_axe.py) in headless Chromium at 390, 1024 and 1440 px, in the light and the dark theme:
no serious or critical violation, text contrast >= 4.5:1 included; every result named with its
method, its rank, whether it is the ground truth and its caption.

Before issue 44 (axe-core 4.14.1 on the Compare tab): grey text at 2.45:1 in 17 places, indigo
labels at 3.6:1, white on indigo at 4.46:1; results announced as "Thumbnail 1 of 8" (56 of
them: their captions not in their names, the green frame seen only); the reference preview a
nameless button; on the Figures tab a scroll box out of the keyboard's reach; in the dark theme
the footer on a white body (1.5:1).

The Annotate and sign-in screens are another engineer's (ui/annotate*.py, ui/signin.py); their
check is left to that work (`axe_violations` takes any page).
"""
import os
import re

import pytest
from _axe import axe_violations, describe
from _cir_fakes import N_QUERIES, fake_trained_methods, make_test_engine
from test_app_live import CHROMIUM, COLUMNS, _free_port

from ui import build_demo, launch_kwargs
from ui.settings import AppConfig

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} absent: install Debian's "
                                "chromium (apt-get install -y chromium) to run the browser test")
WIDTHS = (390, 1024, 1440)
LABELS = {"pact": "PACT", "dice": "DiCE", "pace": "PACE", "compose-only": "compose-only", "sum": "Sum (baseline)"}


@pytest.fixture(scope="module")
def app():
    with fake_trained_methods():
        engine = make_test_engine()
        engine.methods.available()
    cfg = AppConfig(world_queries=N_QUERIES, host="127.0.0.1", port=_free_port())
    demo = build_demo(cfg, engine=engine)
    demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs(cfg))
    try:
        yield demo, engine
    finally:
        demo.close()


def _clean(page, where: str) -> None:
    bad = axe_violations(page)
    assert bad == [], f"{where}:\n{describe(bad)}"


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("width", WIDTHS)
def test_compare_and_figures_have_no_serious_violations(app, browser, width, theme):
    from playwright.sync_api import expect

    demo, engine = app
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(f"{demo.local_url}?__theme={theme}")
    expect(page.locator("#ref-browser .thumbnail-item").first).to_be_visible(timeout=60_000)
    where = f"{width} px, {theme}"
    _clean(page, f"Compare before a request, {where}")
    page.locator("#compare-btn").click()  # the first example: a world query, its ground truth known
    for name in COLUMNS:
        expect(page.locator(f"#col-{name} .thumbnail-item")).to_have_count(8, timeout=60_000)
    expect(page.locator("#compare-status")).to_contain_text("framed in green")
    page.wait_for_timeout(300)  # the names are given on the next animation frame
    # every result says whose it is, its rank, whether it is the ground truth, and its caption
    for name in COLUMNS:
        for i, item in enumerate(page.locator(f"#col-{name} .thumbnail-item").all()):
            label = item.get_attribute("aria-label")
            caption = " ".join(item.locator(".caption-label").inner_text().split())
            gt = "ground-truth target" if "✓ target" in caption else "not the ground truth"
            assert label == f"{LABELS[name]} result {i + 1}, {gt}: {caption}", label
    step = page.locator("#prog-step-2 .thumbnail-item").first.get_attribute("aria-label")
    assert re.match(r"PACE step 2 result 1, (ground-truth target|not the ground truth): #1 ", step), step
    _clean(page, f"Compare with results, {where}")
    page.locator("#col-dice .thumbnail-item").nth(1).click()
    expect(page.locator("#result-preview")).to_be_visible(timeout=20_000)
    page.wait_for_timeout(300)
    _clean(page, f"Compare with a result open, {where}")
    page.keyboard.press("Escape")
    page.get_by_role("tab", name="Examples").click()
    expect(page.locator("#ref-examples-gallery .thumbnail-item").first).to_be_visible()
    page.wait_for_timeout(300)
    assert page.locator("#ref-examples-gallery .thumbnail-item").first.get_attribute("aria-label").startswith(
        "Example query: test-")
    _clean(page, f"Compare's examples, {where}")
    page.get_by_role("tab", name="Figures").click()
    page.locator("#fig-map label").click()
    page.locator("#fig-export").click()
    expect(page.locator("#fig-status")).to_contain_text("Exported", timeout=120_000)
    page.wait_for_timeout(300)
    _clean(page, f"Figures after an export, {where}")
    page.close()


def test_the_sign_in_page_has_no_serious_violations(browser, tmp_path):
    """Gradio's login page had no <title> (axe: document-title, serious): ui/http_guard.py gives an
    HTML page without one the app's."""
    users = tmp_path / "users.txt"
    users.write_text("alice:wonderland\n")
    with fake_trained_methods():
        engine = make_test_engine()
    cfg = AppConfig(world_queries=N_QUERIES, host="127.0.0.1", port=_free_port(), db=str(tmp_path / "a.sqlite"),
                    annotators=str(users))
    demo = build_demo(cfg, engine=engine)
    demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs(cfg))
    try:
        page = browser.new_page(viewport={"width": 1024, "height": 900})
        page.goto(demo.local_url)
        page.locator("input[type=password]").first.wait_for(timeout=60_000)
        _clean(page, "the sign-in page")
    finally:
        demo.close()
