"""The film world in the app (issue 44): with `--gallery world:films` the Examples tab offers the
film benchmark's queries, a film query's ground-truth keyframes are framed in green, the blue
dot follows the actor the query is about, and the hints speak of films (before: an empty tab
captioned "World test queries", hints about squares). On a small film world (2 val films) with
the tiny backbone, in-process and in headless Chromium at 390, 1024 and 1440 px."""
import functools
import os

import numpy as np
import pytest
from _cir_fakes import backbone, cache_root, fake_trained_methods, plain
from test_app_live import CHROMIUM, CHROMIUM_ARGS, _free_port

from cir_core.methods.base import Method

WIDTHS = (390, 1024, 1440)
browser_only = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} absent: install Debian's "
                                  "chromium (apt-get install -y chromium) to run the browser test")


@functools.lru_cache(maxsize=None)
def films():
    """(film benchmark, gallery, embeddings): 2 val films, ~1,900 keyframes, embedded once."""
    from cir_core.gallery import EmbeddingCache
    from cir_core.world.films.benchmark import build_film_benchmark

    fb = build_film_benchmark("val", n_queries=40, n_films=2)
    gallery = fb.gallery(backbone().image_size)
    return fb, gallery, EmbeddingCache(cache_root()).embed(gallery, backbone())


class Oracle(Method):
    """Retrieves a query's ground truth on purpose (its query is a ground-truth keyframe's own
    embedding), so the green frame must show: the test checks the frame, not a method."""

    name, label, app_role, order = "oracle", "Oracle", "column", 9
    rows: dict = {}

    def _compose(self, refs, texts):
        return np.stack([self.rows.get(t, refs.emb[i]) for i, t in enumerate(texts)])


def film_engine():
    from cir_core.engine import CheckpointSource, Engine

    fb, gallery, emb = films()
    folder = cache_root() / "no-checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    engine = Engine(backbone(), gallery, emb, bench=fb, checkpoints=CheckpointSource(str(folder), folder))
    gts = fb.gt_sets()
    Oracle.rows = {q.text: emb[min(gt)] for q, gt in zip(fb.queries, gts) if gt}
    return engine


def test_the_film_world_has_queries_ground_truth_and_the_actor_they_follow():
    from ui.compare import _load
    from ui.reference import example_items
    from ui.results import compare_view

    with fake_trained_methods(oracle=Oracle):
        engine = film_engine()
        assert engine.view.domain == "films" and engine.view.bench is None  # no world scenes to read
        ex = engine.view.example_queries()
        assert len(ex) == 6
        q = next(q for q in ex if Oracle.rows.get(q.text) is not None)
        _, row = engine.view.query(q.query_id)
        ref = engine.view.reference_from_row(row)
        who = engine.view.query_character(ref, q.text)
        assert who and who in (engine.view.gallery.items[row].meta["character_ids"])
        res = engine.compare(ref, q.text, k=8, methods=["oracle", "pact"])
        assert res.query_id == q.query_id and res.target_rows
        hits = res.methods[0].hits
        assert hits[0].is_target and all(h.is_target == (h.row in res.target_rows) for h in hits)
        # the blue dot: the actor the query is about among the keyframe's cast
        assert all(h.same_character == engine.view.shows(h.row, who) for h in hits)
        view = compare_view(engine, engine.view.item_id(row), None, q.text, k=8, names=["oracle", "pact"])
        assert f"film query **{q.query_id}**, about **{who}**" in plain(view.status)
        items, ids = example_items(engine)
        assert ids[0] == ex[0].query_id and all(": " in cap for _, cap in items)  # 'val-00001 · Ada: …'
        out = _load(engine, {}, [])
        edit, search, note = out[7], out[-2], out[-1]
        assert "character sit" in edit["placeholder"] and "square" not in edit["placeholder"]
        assert "film" in search["placeholder"] and "film world" in note and "World test" not in note


@browser_only
@pytest.mark.parametrize("width", WIDTHS)
def test_the_examples_tab_offers_film_queries_with_their_ground_truth_framed(width):
    from playwright.sync_api import expect, sync_playwright

    from ui import build_demo, launch_kwargs
    from ui.settings import AppConfig

    with fake_trained_methods(oracle=Oracle):
        engine = film_engine()
        engine.methods.available()
        cfg = AppConfig(gallery="world:films", host="127.0.0.1", port=_free_port(),
                        methods=["oracle", "pact", "dice", "pace", "compose-only", "sum"])
        demo = build_demo(cfg, engine=engine)
        demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs(cfg))
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    page = browser.new_page(viewport={"width": width, "height": 900})
                    page.goto(demo.local_url)
                    expect(page.locator("#banner")).to_contain_text("film world keyframes", timeout=60_000)
                    assert "square" not in (page.locator("#edit-text textarea").get_attribute("placeholder") or "")
                    page.get_by_role("tab", name="Examples").click()
                    expect(page.locator("#ref-examples-note")).to_contain_text("film world")
                    examples = page.locator("#ref-examples-gallery .thumbnail-item")
                    expect(examples).to_have_count(6, timeout=30_000)
                    ex = engine.view.example_queries()
                    i = next(i for i, q in enumerate(ex) if Oracle.rows.get(q.text) is not None)
                    examples.nth(i).click()
                    expect(page.locator("#edit-text textarea")).to_have_value(ex[i].text, timeout=20_000)
                    page.locator("#compare-btn").click()
                    col = page.locator("#col-oracle .thumbnail-item")
                    expect(col).to_have_count(8, timeout=60_000)
                    expect(page.locator("#compare-status")).to_contain_text(f"film query {ex[i].query_id}")
                    expect(col.first.locator(".caption-label")).to_contain_text("✓ target")
                    page.close()
                finally:
                    browser.close()
        finally:
            demo.close()
