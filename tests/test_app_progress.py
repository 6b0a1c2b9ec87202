"""Honest progress (issue 44): while the engine is built (a gallery embedded, a download, an
index) the page says how far with n/N and an ETA, and the log gets tqdm's line; a Compare that
waits for a first-use build (CIReVL's caption bank, a method's load) shows it in the page too.
Before issue 44 the page showed "processing | 347 s" in every component with no bar, no count
and no ETA, and the log said nothing (the gallery was embedded with `progress=False`)."""
import os
import threading

import pytest
from _cir_fakes import N_QUERIES, fake_trained_methods, make_test_engine
from test_app_live import CHROMIUM, EDIT, _free_port

from cir_core import timing
from cir_core.methods.base import Method
from cir_core.progress import tracked
from ui import build_demo, launch_kwargs
from ui.settings import AppConfig

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} absent: install Debian's "
                                "chromium (apt-get install -y chromium) to run the browser test")
WIDTHS = (390, 1024, 1440)


class Gate:
    """Steps a fake long job one at a time, when the test says."""

    def __init__(self):
        self.steps = threading.Semaphore(0)

    def step(self, n: int = 1) -> None:
        for _ in range(n):
            self.steps.release()

    def wait(self) -> None:
        assert self.steps.acquire(timeout=120), "the test never released this step"


def _launch(**kw):
    cfg = AppConfig(world_queries=N_QUERIES, host="127.0.0.1", port=_free_port())
    demo = build_demo(cfg, **kw)
    demo.launch(prevent_thread_lock=True, quiet=True, **launch_kwargs(cfg))
    return demo


@pytest.mark.parametrize("width", WIDTHS)
def test_the_page_says_how_far_the_gallery_embedding_is(browser, width, monkeypatch, capfd):
    from playwright.sync_api import expect

    monkeypatch.setenv("CIR_PROGRESS_INTERVAL", "0")
    gate = Gate()
    with fake_trained_methods():
        engine = make_test_engine()
        engine.methods.available()

    def slow_loader(cfg, progress_cb=None):
        with tracked("embedding test-gallery", total=4, unit="image") as task:
            for _ in range(4):
                gate.wait()
                task.update(1)
        return engine

    demo = _launch(loader=slow_loader)
    try:
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(demo.local_url)
        banner = page.locator("#banner")
        expect(banner).to_contain_text("embedding test-gallery: 0/4 images", timeout=60_000)
        gate.step(1)
        page.wait_for_timeout(1200)  # past the quiet second: the rate and the ETA are known
        gate.step(1)
        expect(banner).to_contain_text("2/4 images", timeout=30_000)
        expect(banner).to_contain_text("left")  # an ETA
        expect(banner).to_contain_text("first run only")
        # Gradio's own progress bar says it too
        expect(page.locator(".progress-text, .meta-text, .progress-level").first).to_be_visible()
        gate.step(2)
        expect(banner).to_contain_text("Backbone", timeout=60_000)  # the engine's banner once built
        expect(page.locator("#ref-browser .thumbnail-item").first).to_be_visible(timeout=30_000)
        page.close()
    finally:
        demo.close()
    err = capfd.readouterr().err
    assert "embedding test-gallery:  50%" in err and "2/4 [" in err  # tqdm's line in the log
    assert "embedding test-gallery: 100%" in err


class FirstUseBank(Method):
    """A method whose first compose builds a caption bank, step by step when the test says."""

    name, label, app_role, order = "bank-method", "Bank method", "optional", 99
    gate: Gate

    def _compose(self, refs, texts):
        if not getattr(type(self), "built", False):
            with timing.one_time_build("Bank method: embedding its caption bank", total=3, unit="caption") as t:
                for _ in range(3):
                    type(self).gate.wait()
                    t.update(1)
            type(self).built = True
        return refs.emb + self.backbone.encode_texts(texts)


def test_a_compare_waiting_for_a_first_use_build_shows_it(browser):
    from playwright.sync_api import expect

    FirstUseBank.gate, FirstUseBank.built = Gate(), False
    with fake_trained_methods(**{FirstUseBank.name: FirstUseBank}):
        engine = make_test_engine(batch_wait_ms=1)
        engine.methods.available()
        demo = _launch(engine=engine)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(demo.local_url)
            expect(page.locator("#ref-browser .thumbnail-item").first).to_be_visible(timeout=60_000)
            page.locator("#ref-browser .thumbnail-item").nth(2).click()
            page.locator("#edit-text textarea").fill(EDIT)
            page.locator("#extra-methods label", has_text="Bank method").click()
            page.locator("#compare-btn").click()
            FirstUseBank.gate.step(1)
            # the progress over the results says which build it waits for, with n/N
            expect(page.get_by_text("Bank method: embedding its caption bank").first).to_be_visible(timeout=30_000)
            expect(page.get_by_text("1/3").first).to_be_visible(timeout=30_000)
            FirstUseBank.gate.step(2)
            expect(page.locator("#col-bank-method .thumbnail-item")).to_have_count(8, timeout=60_000)
            # the build is shown apart from the method's own compose time
            expect(page.locator("#compare-timings")).to_contain_text("one-time builds")
            page.close()
        finally:
            demo.close()
