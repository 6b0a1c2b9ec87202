"""The campaign's new screens in headless Chromium, at 1440 and 390 px, through the launched app
with an annotators file that names a reviewer and an organiser (issue 45):

- the **reviewer's screen** (Review tab): the pair and the anonymised answers, no annotator's
  name, no method, no gold; deciding by keyboard moves on; a non-reviewer has no Review tab and
  the service refuses their calls;
- the **organiser's table** (Results): per annotator with intervals; pausing one stops their
  queue; a non-organiser never sees the panel;
- the **pairwise screen** (Annotate on a pairwise set): reference, A and B, answered with one key.

Every screen is checked for sideways scrolling and for pictures inside the viewport.
Skipped when /usr/bin/chromium is absent."""
from __future__ import annotations

import os
import re

import pytest
from _axe import axe_violations, describe
from _cir_fakes import N_QUERIES, fake_methods_engine
from test_app_live import CHROMIUM, _free_port

from db.migrate import init_db
from db.pooling import pool_pairwise, pool_query_set, world_queries
from db.service import AnnotationService
from db.sqlite import open_db, session_factory
from ui import build_demo, launch_kwargs
from ui.settings import AppConfig

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} absent")
WIDTHS = (1440, 390)
NAMES = ("ann1", "ann2", "carol", "olga", "pat")
METHODS = ["pact", "dice", "sum"]

LAYOUT_JS = """(sel) => {
  const bad = [], vw = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > vw + 1) bad.push(`page ${document.documentElement.scrollWidth} px wide in ${vw}`);
  for (const img of document.querySelectorAll(sel)) {
    const r = img.getBoundingClientRect();
    if (!img.checkVisibility()) continue;
    if (r.left < -1 || r.right > vw + 1) bad.push(`${img.id}: ${Math.round(r.left)}..${Math.round(r.right)} in ${vw}`);
    if (r.width < 60) bad.push(`${img.id}: only ${Math.round(r.width)} px wide`);
  }
  return bad;
}"""


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    root = tmp_path_factory.mktemp("review-live")
    users = root / "users.txt"
    users.write_text("".join(f"{n}:pw-{n}\n" for n in NAMES) + "@reviewer carol\n@organiser olga\n")
    engine = fake_methods_engine()
    db = open_db(root / "ann.sqlite")
    init_db(db)
    with session_factory(db)() as s:
        pool_query_set(s, engine, "pt", world_queries(engine, 8), METHODS, k=2, overlap=2, gold_fraction=0.1)
        pool_pairwise(s, engine, "pw", world_queries(engine, 8), [("pact", "cosine"), ("dice", "chord")], k=2)
    db.dispose()
    svc = AnnotationService(root / "ann.sqlite")
    for who, answer in (("ann1", ("yes", "yes")), ("ann2", ("no", "no"))):
        st = svc.open(who, "pt")
        while st.task is not None:  # two annotators who never agree: every pair goes to review
            st = svc.answer(who, "pt", st.task.task_id, *answer)
    svc.close()
    cfg = AppConfig(world_queries=N_QUERIES, host="127.0.0.1", port=_free_port(), db=str(root / "ann.sqlite"),
                    annotators=str(users))
    demo = build_demo(cfg, engine=engine)
    demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs(cfg))
    try:
        yield demo
    finally:
        demo.close()


def _page(browser, demo, user: str, width: int):
    ctx = browser.new_context(viewport={"width": width, "height": 1000})
    page = ctx.new_page()
    page.goto(demo.local_url)
    page.locator("input[type=password]").first.wait_for(timeout=60_000)
    page.locator("input:not([type=password]):not([type=hidden])").first.fill(user)
    page.locator("input[type=password]").first.fill(f"pw-{user}")
    page.keyboard.press("Enter")
    page.locator("[role=tablist] button").first.wait_for(timeout=90_000)
    return ctx, page


TAB_JS = """(name) => {
  const bar = document.querySelector('.tabs');
  if (!bar) return null;
  const shown = [...bar.querySelectorAll('[role=tablist] button')].find(b => b.innerText.trim() === name && b.checkVisibility());
  if (shown) return 'bar';
  const more = [...bar.querySelectorAll('.overflow-dropdown button')].find(b => b.innerText.trim() === name);
  return more ? 'menu' : null;
}"""


def _tab(page, name: str) -> None:
    """Open a top-level tab; at narrow widths Gradio moves the last ones into a "More tabs" menu
    (and a tab shown on load for a role appears once the page has loaded)."""
    where = page.wait_for_function(TAB_JS, arg=name, timeout=90_000).json_value()
    if where == "bar":
        page.locator(".tabs").first.get_by_role("tab", name=name, exact=True).click()
        return
    page.locator(".tabs").first.locator("button[aria-label='More tabs']").first.click()
    page.locator(".tabs").first.locator(".overflow-dropdown button", has_text=name).first.click()


def _tabs(page) -> list[str]:
    """Every top-level tab's name, in the bar or in its overflow menu."""
    return [t.strip() for t in page.locator(".tabs").first.locator(
        "[role=tablist] button, .overflow-dropdown button").all_inner_texts()]


def _pictures_loaded(page, ids) -> None:
    for img in ids:
        page.wait_for_function(f"document.querySelector('#{img}') && document.querySelector('#{img}').naturalWidth > 0",
                               timeout=30_000)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_reviewer_sees_the_pair_and_anonymised_answers_and_decides_by_keyboard(app, browser, width, tmp_path):
    from playwright.sync_api import expect

    ctx, page = _page(browser, app, "carol", width)
    try:
        _tab(page, "Review")
        status = page.locator("#rev-status")
        expect(status).to_contain_text("waiting", timeout=60_000)
        before = int(re.search(r"you decided (\d+)", status.inner_text())[1])
        _pictures_loaded(page, ("rev-ref", "rev-cand"))
        answers = page.locator("#rev-answer-list li")
        expect(answers).to_have_count(2)
        texts = answers.all_inner_texts()
        # canonical order: sorted by the answers (each question's choice order), never by who
        assert texts == ["Same character · Edit satisfied", "Different character · Not satisfied"]
        tab = " ".join(page.locator(s).inner_text() for s in ("#rev-status", "#rev-edit", "#rev-answers"))
        for word in ("ann1", "ann2", "pact", "dice", "sum", "gold", "cosine", "chord", "rank"):
            assert word not in tab.lower(), (word, tab)  # blind: nobody's name, no method, no gold
        assert page.evaluate(LAYOUT_JS, "#rev-pair img") == []
        bad = axe_violations(page, context="#rev-pair, #rev-answers, #rev-status, #rev-edit")
        assert bad == [], describe(bad)
        page.screenshot(path=str(tmp_path / f"review-{width}.png"), full_page=True)
        page.locator("body").click(position={"x": 2, "y": 2})
        page.keyboard.press("1")
        expect(status).to_contain_text("Now the edit question")
        page.keyboard.press("e")
        expect(status).to_contain_text(f"you decided {before + 1}", timeout=30_000)
    finally:
        ctx.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_organiser_table_and_pausing(app, browser, width, tmp_path):
    from playwright.sync_api import expect

    ctx, page = _page(browser, app, "olga", width)
    try:
        _tab(page, "Results")
        expect(page.locator("#org-panel")).to_be_visible(timeout=60_000)
        page.locator("#org-go").click()
        table = page.locator("#org-table")
        expect(table).to_contain_text("ann1", timeout=60_000)
        expect(table).to_contain_text("ann2")
        assert table.locator("td").filter(has_text="[").count() > 0  # intervals
        expect(page.locator("#org-drift")).to_be_visible()
        page.locator("#org-who input").click()
        page.get_by_role("option", name="ann2").click()
        page.locator("#org-pause").click()
        expect(table).to_contain_text("paused", timeout=30_000)
        assert page.evaluate(LAYOUT_JS, "#org-drift img") == []
        bad = axe_violations(page, context="#org-panel")
        assert bad == [], describe(bad)
        page.screenshot(path=str(tmp_path / f"organiser-{width}.png"), full_page=True)
        page.locator("#org-resume").click()
        expect(table).to_contain_text("active again", timeout=30_000)
        assert "Review" not in _tabs(page)  # olga reviews nothing
    finally:
        ctx.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_pairwise_screen_answers_with_one_key(app, browser, width, tmp_path):
    from playwright.sync_api import expect

    ctx, page = _page(browser, app, "pat", width)
    try:
        _tab(page, "Annotate")
        status = page.locator("#ann-status")
        expect(status).to_contain_text("Signed in as pat", timeout=90_000)
        page.locator("#ann-set input").click()
        page.get_by_role("option", name="pw").click()
        expect(status).to_contain_text("set pw", timeout=30_000)
        _pictures_loaded(page, ("ann-ref", "ann-cand", "ann-cand-b"))
        expect(page.locator("#ann-pref-a")).to_be_visible()
        expect(page.locator("#ann-id-yes")).to_be_hidden()  # a pairwise set asks its one question
        done = int(re.search(r"\*?\*?(\d+) / ", status.inner_text())[1])
        assert page.evaluate(LAYOUT_JS, "#ann-pair img") == []
        bad = axe_violations(page, context="#ann-pair, #ann-status, #ann-edit, #ann-row-preference")
        assert bad == [], describe(bad)
        page.screenshot(path=str(tmp_path / f"pairwise-{width}.png"), full_page=True)
        page.locator("body").click(position={"x": 2, "y": 2})
        page.keyboard.press("2")  # B
        expect(status).to_contain_text(f"{done + 1} / ", timeout=30_000)
        assert "Review" not in _tabs(page)
        _tab(page, "Results")
        expect(page.locator("#org-panel")).to_be_hidden()
    finally:
        ctx.close()
