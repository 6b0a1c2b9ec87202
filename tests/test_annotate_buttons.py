"""The Annotate tab shows the chosen answers: on the buttons (✓, filled) and in words, also when
B brings back an answered pair (issue 29). Handlers directly, then the page in headless Chromium."""
from __future__ import annotations

import os

import pytest
from _cir_fakes import fake_methods_engine, plain

from db.service import DEFAULT_SET, AnnotationService
from ui import annotate


@pytest.fixture(scope="module")
def eng():
    return fake_methods_engine()


@pytest.fixture(scope="module")
def svc(tmp_path_factory, eng):
    s = AnnotationService(tmp_path_factory.mktemp("ann-buttons") / "ann.sqlite")
    s.ensure_default_set(eng)
    yield s
    s.close()


def test_answers_in_words_and_on_the_buttons(svc, eng) -> None:
    assert annotate.answer_words("done", "cant_tell", "no") == "Can't tell · Not satisfied"
    assert annotate.answer_words("skipped", None, None) == "skipped"
    assert annotate.chosen_css(None, None) == ""
    v = annotate.open_view(svc, eng, "bea", DEFAULT_SET)
    pair = annotate._render(v)[2]
    assert "<style>" not in pair  # nothing chosen yet
    v = annotate.choose_view(svc, eng, "bea", v.state, "identity", "cant_tell", "")
    pair = annotate._render(v)[2]
    assert "#ann-id-cant_tell" in pair and "#ann-edit-" not in pair and "Can't tell" in v.status
    v = annotate.choose_view(svc, eng, "bea", v.state, "edit", "no", "")  # saved, next pair
    assert "<style>" not in annotate._render(v)[2]
    back = annotate.move_view(svc, eng, "bea", v.state, "back")
    status, pair = plain(back.status), annotate._render(back)[2]
    assert "your answer: **Can't tell · Not satisfied**" in status and "cant_tell" not in status
    assert "#ann-id-cant_tell" in pair and "#ann-edit-no" in pair and "✓" in pair


CHROMIUM = "/usr/bin/chromium"


def settled(page, selector: str, colour: str, same: bool = True) -> None:
    """Wait until the element's background is (or is no longer) `colour`."""
    op = "===" if same else "!=="
    page.wait_for_function(f"getComputedStyle(document.querySelector('{selector}')).backgroundColor {op} "
                           f"'{colour}'", timeout=5_000)


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} absent")
def test_the_chosen_button_is_marked_in_the_browser(tmp_path) -> None:
    from _cir_fakes import N_QUERIES
    from playwright.sync_api import expect, sync_playwright
    from test_annotate_live import _open_tab, _sign_in
    from test_app_live import CHROMIUM_ARGS, _free_port

    from ui import build_demo, launch_kwargs
    from ui.settings import AppConfig

    users = tmp_path / "users.txt"
    users.write_text("alice:wonderland\n")
    cfg = AppConfig(world_queries=N_QUERIES, host="127.0.0.1", port=_free_port(), db=str(tmp_path / "a.sqlite"),
                    annotators=str(users))
    demo = build_demo(cfg, engine=fake_methods_engine())
    demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs(cfg))
    bg = "el => getComputedStyle(el).backgroundColor"
    mark = "el => getComputedStyle(el, '::before').content"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 900})
                _sign_in(page, demo.local_url)
                _open_tab(page)
                status = page.locator("#ann-status")
                expect(status).to_contain_text("Signed in as alice", timeout=90_000)
                plain_bg = page.locator("#ann-id-no").evaluate(bg)
                page.locator("body").click(position={"x": 5, "y": 5})
                page.keyboard.press("3")
                expect(status).to_contain_text("Can't tell")
                chosen = page.locator("#ann-id-cant_tell")
                assert "✓" in chosen.evaluate(mark)
                settled(page, "#ann-id-cant_tell", plain_bg, same=False)
                assert page.locator("#ann-id-no").evaluate(bg) == plain_bg
                page.keyboard.press("e")
                expect(status).to_contain_text("1 / ")
                assert page.locator("#ann-id-cant_tell").evaluate(mark) == "none"  # the next pair: none chosen
                settled(page, "#ann-id-cant_tell", plain_bg)  # (buttons fade their colour)
                page.keyboard.press("b")
                expect(status).to_contain_text("your answer: Can't tell · Not satisfied")
                settled(page, "#ann-id-cant_tell", plain_bg, same=False)
                settled(page, "#ann-edit-no", plain_bg, same=False)
                # the skip reason reads in full
                box = page.locator("#ann-skip-reason input").first
                assert box.evaluate("el => el.scrollWidth <= el.clientWidth + 1"), "skip reason cut off"
            finally:
                browser.close()
    finally:
        demo.close()
