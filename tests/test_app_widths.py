"""The Compare tab at every width, and what a daily user expects of it (issue 29), in headless
Chromium against `python app.py` on the shipped assets (so every optional column has results).

- At 390, 1024, 1440 and 1920 px, with the default columns and with every optional one: the page
  never scrolls sideways, the result columns are equal and whole, every thumbnail and caption
  lies inside its column (no text cut), the thumbnails are one size, the progression's too.
  Screenshots go to the test's folder; CIR_UPDATE_SCREENSHOT=1 copies them to docs/img/.
- A permalink reopens the same result in a fresh browser; Shift+Enter runs Compare; a click on a
  result opens it at full size (Esc closes it) and can make it the reference; the top-k downloads
  as CSV; the edit box counts its characters and an over-long edit is cut with a note.
"""
from __future__ import annotations

import csv
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from test_walkthrough import CHROMIUM, CHROMIUM_ARGS, ROOT, _free_port, start_app, wait_for_server

from cir_core.methods import extra_methods

EDIT = "Make the square blue. Move the character to the left."
WIDTHS = (390, 1024, 1440, 1920)
OPTIONAL = tuple(extra_methods())  # every optional column the registry offers (the peers, RTD, CIReVL, ...)
DEFAULT = ("pact", "dice", "pace", "compose-only", "sum")

pytestmark = [
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} absent: install Debian's chromium"),
    pytest.mark.skipif(not (ROOT / "assets" / "backbone" / "cir-tiny-vit" / "open_clip_config.json").is_file(),
                       reason="the shipped backbone is not built"),
]

# What the layout promises, measured in the page: [] when it holds, else what breaks.
LAYOUT_JS = """() => {
  const bad = [], vw = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > vw) bad.push(`page ${document.documentElement.scrollWidth} px wide in ${vw}`);
  const cols = [...document.querySelectorAll('#result-columns > .column')].filter(c => c.checkVisibility());
  const widths = cols.map(c => c.getBoundingClientRect().width);
  if (Math.max(...widths) - Math.min(...widths) > 1) bad.push(`unequal columns ${widths.map(Math.round)}`);
  const inside = (el, box, what) => {
    const r = el.getBoundingClientRect(), b = box.getBoundingClientRect();
    if (r.width && (r.left < b.left - 1 || r.right > b.right + 1)) bad.push(`${what}: ${Math.round(r.width)} px at ${Math.round(r.left - b.left)} in ${Math.round(b.width)}`);
    if (el.scrollWidth > el.clientWidth + 1) bad.push(`${what}: text cut (${el.scrollWidth} > ${el.clientWidth})`);
  };
  for (const c of cols) for (const el of c.querySelectorAll('.thumbnail-item, img, .caption-label, .col-head'))
    inside(el, c, `${c.querySelector('.result-gallery, .col-head')?.id || 'column'} ${el.className || el.tagName}`);
  for (const g of document.querySelectorAll('.prog-gallery')) if (g.checkVisibility())
    for (const el of g.querySelectorAll('.thumbnail-item, .caption-label')) inside(el, g, `${g.id} thumbnail`);
  const sizes = new Set([...document.querySelectorAll('.result-gallery .thumbnail-item img')]
    .filter(i => i.checkVisibility()).map(i => Math.round(i.getBoundingClientRect().width)));
  if (sizes.size > 1) bad.push(`thumbnails of ${[...sizes]} px`);
  const tops = new Set([...document.querySelectorAll('#prog-step-1 .thumbnail-item')]
    .map(t => Math.round(t.getBoundingClientRect().top)));
  return {bad, columns: cols.length, thumb: [...sizes][0], prog_rows: tops.size};
}"""
EAGER_JS = """async () => {
  const imgs = [...document.querySelectorAll('img')];
  imgs.forEach(i => { i.loading = 'eager'; });
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
}"""


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    port = _free_port()
    proc = start_app(tmp_path_factory.mktemp("cache"), port)
    try:
        wait_for_server(proc, port)
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()


@pytest.fixture(scope="module")
def playwright():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright):
    b = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        yield b
    finally:
        b.close()


def _open(page, url: str) -> None:
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator("#ref-browser .thumbnail-item").first).to_be_visible(timeout=120_000)


def _compare(page, columns, k: int = 8) -> None:
    from playwright.sync_api import expect

    page.locator("#compare-btn").click()
    for name in columns:
        expect(page.locator(f"#col-{name} .thumbnail-item")).to_have_count(k, timeout=120_000)


def _captions(page, columns) -> dict[str, list[str]]:
    return {n: page.locator(f"#col-{n} .caption-label").all_inner_texts() for n in columns}


def _topk_csv(page, path: Path) -> list[dict[str, str]]:
    """The rows of "Top-k as CSV", downloaded as a user does."""
    with page.expect_download() as dl:
        page.locator("#topk-csv").click()
    dl.value.save_as(path)
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _shot(page, path: Path) -> None:
    """A full-page screenshot, as a small palette PNG."""
    from PIL import Image

    page.evaluate(EAGER_JS)
    page.screenshot(path=str(path), full_page=True)
    Image.open(path).convert("RGB").quantize(128).save(path, optimize=True)


def test_every_width_with_default_and_every_optional_column(app, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    _open(page, app)
    page.locator("#ref-browser .thumbnail-item").first.click()
    page.locator("#edit-text textarea").fill(EDIT)
    _compare(page, DEFAULT)
    for label, columns in (("", DEFAULT), ("-all", DEFAULT + OPTIONAL)):
        if label:
            for box in page.locator("#extra-methods label").all():
                box.click()
            _compare(page, columns)
        for w in WIDTHS:
            page.set_viewport_size({"width": w, "height": 1000})
            page.wait_for_timeout(400)  # the reflow
            got = page.evaluate(LAYOUT_JS)
            assert got["bad"] == [] and got["columns"] == len(columns), f"{w} px{label}: {got}"
            assert 80 <= got["thumb"] <= 180, f"{w} px{label}: {got['thumb']} px thumbnails"
            assert page.locator("#prog-step-2 .thumbnail-item").count() == 8
            assert w < 1024 or got["prog_rows"] == 1, f"{w} px: a progression step wraps"
            _shot(page, tmp_path / f"compare-{w}{label}.png")
    page.close()
    if os.environ.get("CIR_UPDATE_SCREENSHOT"):
        for png in tmp_path.glob("compare-*.png"):
            shutil.copy(png, ROOT / "docs" / "img" / png.name)


def test_a_permalink_reopens_the_same_result_in_a_fresh_browser(app, playwright, browser, tmp_path):
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    _open(page, app)
    page.locator("#ref-browser .thumbnail-item").nth(3).click()
    ref = page.locator("#ref-id input, #ref-id textarea").first
    expect(ref).not_to_have_value("", timeout=20_000)
    page.locator("#edit-text textarea").fill(EDIT)
    page.locator("#k-slider input[type=number]").fill("6")
    page.locator("#k-slider input[type=number]").press("Enter")
    page.get_by_role("radio", name="Chord").check()
    page.locator("#extra-methods label", has_text=re.compile(r"^\s*Pic2Word\s*$")).click()
    _compare(page, DEFAULT + ("pic2word",), k=6)
    link = page.locator("#permalink input, #permalink textarea").first
    expect(link).to_have_value(page.url, timeout=10_000)  # the address bar holds it too
    url, ref_id = page.url, ref.input_value()
    assert "ref=" in url and "scoring=chord" in url and "k=6" in url and "methods=pic2word" in url
    want = _captions(page, DEFAULT + ("pic2word",))
    fresh = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)  # shares nothing but the link
    try:
        page2 = fresh.new_page(viewport={"width": 1024, "height": 900})
        page2.goto(url)
        for name in DEFAULT + ("pic2word",):
            expect(page2.locator(f"#col-{name} .thumbnail-item")).to_have_count(6, timeout=120_000)
        assert _captions(page2, DEFAULT + ("pic2word",)) == want
        expect(page2.locator("#ref-id input, #ref-id textarea").first).to_have_value(ref_id)
        expect(page2.locator("#edit-text textarea")).to_have_value(EDIT)
        assert page2.get_by_role("radio", name="Chord").is_checked()
        expect(page2.locator("#compare-status")).to_contain_text("by Chord")
        # Shift+Enter in the edit box runs Compare (the button says so)
        assert "Shift+Enter" in page2.locator("#compare-btn").inner_text()
        box = page2.locator("#edit-text textarea")
        box.press("End")
        box.type(" Add a red star.")
        box.press("Shift+Enter")
        expect(page2.locator("#compare-status")).to_contain_text("3 sentences", timeout=60_000)
        expect(page2).to_have_url(re.compile("Add%20a%20red%20star"), timeout=10_000)
    finally:
        fresh.close()
    page.close()


def test_preview_use_as_reference_csv_and_the_counter(app, browser, tmp_path):
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    _open(page, app)
    page.locator("#ref-browser .thumbnail-item").first.click()
    page.locator("#edit-text textarea").fill(EDIT)
    expect(page.locator("#edit-counter")).to_contain_text(f"{len(EDIT)} / 2,000 characters")
    _compare(page, DEFAULT)
    # the top-k of every column and step as CSV
    rows = _topk_csv(page, tmp_path / "topk.csv")
    assert len(rows) == 8 * len(DEFAULT) + 8 * 2 and {r["method"] for r in rows} >= set(DEFAULT)
    first_ref = rows[0]["reference"]
    # a click on a result: full size, with its id; Esc closes it; "use as the reference"
    first = page.locator("#col-dice .thumbnail-item").nth(1)
    item = first.locator(".caption-label").inner_text().splitlines()[1]
    assert [r["item_id"] for r in rows if r["method"] == "dice"][1] == item
    first.click()
    box = page.locator("#result-preview")
    expect(box).to_be_visible(timeout=20_000)
    expect(page.locator("#result-preview-info")).to_contain_text(item)
    page.wait_for_function("document.querySelector('#result-preview-image img')?.naturalWidth >= 600",
                           timeout=20_000)
    page.keyboard.press("Escape")
    expect(box).to_be_hidden(timeout=10_000)
    first.click()
    page.locator("#result-preview-use").click()
    expect(page.locator("#ref-id input, #ref-id textarea").first).to_have_value(item, timeout=20_000)
    expect(box).to_be_hidden()
    # ... and Compare runs again on it (the edit kept): the CSV follows once that answer is in
    deadline = time.monotonic() + 120
    while (again := _topk_csv(page, tmp_path / "again.csv"))[0]["reference"] != item:
        assert again[0]["reference"] == first_ref and time.monotonic() < deadline, again[0]
        page.wait_for_timeout(500)
    assert again[0]["edit"] == rows[0]["edit"] and len(again) == len(rows)
    # an edit over the limit: counted as typed, cut with a note
    page.locator("#edit-text textarea").fill("Make the square blue. " * 240)
    expect(page.locator("#edit-counter")).to_contain_text("5,279 / 2,000 characters: over the limit")
    _compare(page, DEFAULT)
    expect(page.locator("#compare-status")).to_contain_text("the limit is 2,000")
    page.close()
