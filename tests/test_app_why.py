"""Why this result, in the app (issue 44): the result preview gives a result's cosine term and
Chord's λ·direction term and its rank under each scoring, the JSON API has the same per hit and
the map of the neighbourhood, and the Compare tab draws the map (an SVG whose every point says
what it is) under the results, at 390, 1024 and 1440 px."""
import os
import re

import pytest
from _cir_fakes import N_QUERIES, fake_trained_methods, make_test_engine
from test_app_live import CHROMIUM, CHROMIUM_ARGS, COLUMNS, EDIT, _free_port

from ui import build_demo, launch_kwargs
from ui.settings import AppConfig

WIDTHS = (390, 1024, 1440)


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


def test_the_json_api_says_why(app):
    from gradio_client import Client

    demo, engine = app
    res = Client(demo.local_url, verbose=False).predict(engine.view.item_id(5), EDIT, 4, "cosine", None, None,
                                                       api_name="/compare")
    for m in res["methods"]:
        for h in m["hits"]:
            w = h["why"]
            assert w["rank_cosine"] == h["rank"] and w["rank_chord"] >= 1
            assert w["chord"] == pytest.approx(w["cosine"] + w["lam"] * w["direction"], abs=1e-6)
            assert h["score"] == pytest.approx(w["cosine"], abs=1e-5)
    kinds = [p["kind"] for p in res["map"]["points"]]
    assert kinds.count("reference") == 1 and kinds.count("query") == len(res["methods"])
    assert kinds.count("step") == 2 and 0 < res["map"]["explained"] <= 1


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} absent: install Debian's chromium")
@pytest.mark.parametrize("width", WIDTHS)
def test_the_preview_gives_the_breakdown_and_the_tab_draws_the_map(app, width):
    from playwright.sync_api import expect, sync_playwright

    demo, engine = app
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(demo.local_url)
            expect(page.locator("#ref-browser .thumbnail-item").nth(5)).to_be_visible(timeout=60_000)
            page.locator("#ref-browser .thumbnail-item").nth(5).click()
            expect(page.locator("#ref-id input, #ref-id textarea").first).to_have_value(engine.view.item_id(5),
                                                                                        timeout=20_000)
            page.locator("#edit-text textarea").fill(EDIT)
            page.get_by_role("radio", name="Chord").check()
            page.locator("#compare-btn").click()
            for name in COLUMNS:
                expect(page.locator(f"#col-{name} .thumbnail-item")).to_have_count(8, timeout=60_000)
            svg = page.locator("#why-map svg.why-map-svg")
            expect(svg).to_be_visible()
            assert svg.get_attribute("role") == "img"
            names = svg.locator("g > title").evaluate_all("els => els.map(e => e.textContent)")
            assert sum(n.startswith("PACT result #") for n in names) == 8 and "PACT's query" in names
            assert any(n.startswith("PACE's query after sentence 2") for n in names)
            assert sum(n.startswith("the reference") for n in names) == 1
            box = svg.bounding_box()
            assert box["width"] <= width and box["x"] >= 0  # inside the page at every width
            expect(page.locator("#why-map figcaption")).to_contain_text("Distance in the map is not the score")
            page.locator("#col-dice .thumbnail-item").nth(2).click()
            info = page.locator("#result-preview-info")
            expect(info).to_contain_text("Why here", timeout=20_000)
            text = info.inner_text()
            m = re.search(r"cosine (-?[\d.]+) \+ λ·direction ([\d.]+) × (-?[\d.]+) = ([+-][\d.]+) → Chord "
                          r"(-?[\d.]+) · rank (\d+) under cosine, (\d+) under Chord", text)
            assert m, text
            cos, lam, d, ld, chord = map(float, m.groups()[:5])
            assert chord == pytest.approx(cos + ld, abs=2e-3) and ld == pytest.approx(lam * d, abs=2e-3)
            assert int(m.group(7)) == 3  # the third Chord result is third under Chord
            assert "#3" in text and "score" in text
        finally:
            browser.close()
