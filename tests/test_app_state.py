"""The Compare tab's state never lies (issue 44), in headless Chromium at 390, 1024 and 1440 px.

Before issue 44: an upload cleared with its × stayed in the preview while Compare said "Choose a
reference first", and a bad upload after that claimed "the previous reference is kept"; "Use as
the reference" changed the reference while the results, status, permalink and CSV still
belonged to the old one. Now clearing an upload clears the reference, a refused upload says what
the reference is, "Use as the reference" re-runs the Compare, and any other change of reference
marks the shown results stale and hides their permalink and CSV until Compare runs again.
"""
import csv
import os
import re
from urllib.parse import quote

import pytest
from _cir_fakes import N_QUERIES, fake_trained_methods, make_test_engine
from test_app_live import CHROMIUM, COLUMNS, EDIT, _free_port

from ui import build_demo, launch_kwargs
from ui.settings import AppConfig

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} absent: install Debian's "
                                "chromium (apt-get install -y chromium) to run the browser test")
WIDTHS = (390, 1024, 1440)
REF_ID = "#ref-id input, #ref-id textarea"


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


def _open(browser, demo, width):
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(demo.local_url)
    expect(page.locator("#ref-browser .thumbnail-item").nth(5)).to_be_visible(timeout=60_000)
    return page


def _compare(page, k: int = 8):
    from playwright.sync_api import expect

    page.locator("#compare-btn").click()
    for name in COLUMNS:
        expect(page.locator(f"#col-{name} .thumbnail-item")).to_have_count(k, timeout=60_000)


def _info(page) -> str:
    return page.locator(".prose.ref-info").inner_text()


@pytest.mark.parametrize("width", WIDTHS)
def test_clearing_an_upload_clears_the_reference(app, browser, width, tmp_path):
    from playwright.sync_api import expect

    demo, engine = app
    good, bad = tmp_path / "photo.png", tmp_path / "broken.png"
    engine.view.image(3, 100).save(good)
    bad.write_bytes(b"not an image at all")
    page = _open(browser, demo, width)
    page.get_by_role("tab", name="Upload").click()
    upload = page.locator("#ref-upload-file input[type=file]")
    upload.set_input_files(str(good))
    expect(page.locator(".prose.ref-info")).to_contain_text("upload: photo.png", timeout=30_000)
    expect(page.locator("#ref-preview img")).to_be_visible()
    page.locator("#ref-upload-file button[aria-label=Clear]").click()
    # the preview and the info no longer show the upload: there is no reference, and they say so
    expect(page.locator(".prose.ref-info")).to_contain_text("No reference", timeout=30_000)
    assert "photo.png" not in _info(page)
    expect(page.locator("#ref-preview img")).to_have_count(0)
    expect(page.locator(REF_ID).first).to_have_value("")
    page.locator("#edit-text textarea").fill(EDIT)
    page.locator("#compare-btn").click()
    expect(page.locator("#compare-status")).to_contain_text("Choose a reference first", timeout=30_000)
    # a refused upload now cannot claim to keep a reference there is none of
    upload.set_input_files(str(bad))
    expect(page.locator(".prose.ref-info")).to_contain_text("broken.png", timeout=30_000)
    assert "previous reference is kept" not in _info(page) and "No reference" in _info(page)
    expect(page.locator("#ref-preview img")).to_have_count(0)
    # with a gallery reference chosen, a refused upload keeps it, and names it
    page.get_by_role("tab", name="Gallery").click()
    page.locator("#ref-browser .thumbnail-item").nth(4).click()
    expect(page.locator(REF_ID).first).to_have_value(engine.view.item_id(4), timeout=20_000)
    page.get_by_role("tab", name="Upload").click()
    upload.set_input_files(str(bad))
    expect(page.locator(".prose.ref-info")).to_contain_text(f"{engine.view.item_id(4)} is kept", timeout=30_000)
    expect(page.locator("#ref-preview img")).to_be_visible()
    page.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_use_as_the_reference_reruns_the_compare(app, browser, width, tmp_path):
    from playwright.sync_api import expect

    demo, engine = app
    page = _open(browser, demo, width)
    page.locator("#ref-browser .thumbnail-item").nth(5).click()
    expect(page.locator(REF_ID).first).to_have_value(engine.view.item_id(5), timeout=20_000)
    page.locator("#edit-text textarea").fill(EDIT)
    _compare(page)
    first = page.locator("#col-dice .thumbnail-item").nth(1)
    item = first.locator(".caption-label").inner_text().splitlines()[1]
    first.click()
    expect(page.locator("#result-preview")).to_be_visible(timeout=20_000)
    page.locator("#result-preview-use").click()
    expect(page.locator(REF_ID).first).to_have_value(item, timeout=20_000)
    # the results, the status, the permalink and the CSV all belong to the new reference
    expect(page.locator("#compare-status")).to_contain_text(f"Reference {item}", timeout=60_000)
    for name in COLUMNS:
        expect(page.locator(f"#col-{name} .thumbnail-item")).to_have_count(8, timeout=60_000)
    link = page.locator("#permalink input, #permalink textarea").first
    expect(link).to_have_value(f"{demo.local_url.rstrip('/')}/?ref={quote(item, safe='/,')}&edit="
                               f"{quote(EDIT, safe='/,')}&k=8&scoring=cosine", timeout=20_000)
    with page.expect_download() as dl:
        page.locator("#topk-csv").click()
    path = tmp_path / "topk.csv"
    dl.value.save_as(path)
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows and {r["reference"] for r in rows} == {item}
    assert item not in [r["item_id"] for r in rows]  # the new reference is never its own result
    page.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_another_reference_marks_the_results_stale(app, browser, width):
    from playwright.sync_api import expect

    demo, engine = app
    page = _open(browser, demo, width)
    page.locator("#ref-browser .thumbnail-item").nth(5).click()
    expect(page.locator(REF_ID).first).to_have_value(engine.view.item_id(5), timeout=20_000)
    page.locator("#edit-text textarea").fill(EDIT)
    _compare(page)
    expect(page.locator("#permalink")).to_be_visible()
    expect(page.locator("#topk-csv")).to_be_visible()
    page.locator("#ref-browser .thumbnail-item").nth(6).click()
    expect(page.locator(REF_ID).first).to_have_value(engine.view.item_id(6), timeout=20_000)
    status = page.locator("#compare-status")
    expect(status).to_contain_text("Stale", timeout=20_000)
    expect(status).to_contain_text(engine.view.item_id(5))
    expect(page.locator("#permalink")).to_be_hidden()
    expect(page.locator("#topk-csv")).to_be_hidden()
    expect(page).not_to_have_url(re.compile("ref="))  # nor does the address bar hold their link
    _compare(page)
    expect(status).not_to_contain_text("Stale")
    expect(status).to_contain_text(f"Reference {engine.view.item_id(6)}")
    expect(page.locator("#permalink")).to_be_visible()
    page.close()
