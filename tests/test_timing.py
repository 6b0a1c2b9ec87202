"""cir_core.timing: a request's own work apart from its waits behind other requests and from
one-time builds (issue 44: under two overlapping requests one request's wait was charged to
another's method, "PACT compose 9,780 ms"). Time is made to pass on demand (a fake clock), so
nothing here depends on how fast the machine is."""
import threading
import time

import numpy as np
import pytest

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from cir_core import timing
from cir_core.methods.base import Method
from cir_core.progress import running

HOUR = 3600.0


class FakeClock:
    """perf_counter plus an offset the test moves forward."""

    def __init__(self):
        self.offset = 0.0

    def __call__(self) -> float:
        return time.perf_counter() + self.offset


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(timing, "clock", fake)
    return fake


def test_charges_count_once_and_only_inside_an_account(clock):
    timing.charge("wait", 5.0)  # no account: nothing to charge
    with timing.account() as mine:
        with timing.charged("wait"):
            clock.offset += 10
            with timing.charged("build"):
                clock.offset += 100  # nested: counted once, as the outer kind
        with timing.one_time_build("a build", total=2, unit="step") as task:
            task.update(2)
            clock.offset += 1
        timing.charge("build", 0.5)
        with timing.account() as same:  # nested accounts are one
            assert same is mine
    assert mine.wait_s == pytest.approx(110, abs=1) and mine.build_s == pytest.approx(1.5, abs=0.5)
    assert timing.charges().total_s == 0
    with pytest.raises(ValueError, match="unknown charge"):
        timing.charge("sleep", 1)


class SlowFirstUse(Method):
    """Builds something for an hour (fake) on its first compose, on the batch worker, and holds
    the build until another request's call is queued behind it."""

    name, label = "slow-first-use", "Slow first use"

    def __init__(self, backbone, clock, queue):
        super().__init__(backbone)
        self.clock, self.queue, self.built = clock, queue, False
        self.entered, self.seen = threading.Event(), []

    def _compose(self, refs, texts):
        if not self.built:
            with timing.one_time_build("fake caption bank", total=4, unit="caption") as task:
                self.entered.set()
                t0 = time.monotonic()
                while self.queue.pending() < 1 and time.monotonic() - t0 < 60:
                    time.sleep(0.01)  # the other request's call is queued behind this build
                for _ in range(4):
                    self.clock.offset += HOUR / 4
                    task.update(1)
                    self.seen.append([t.line() for t in running()])
            self.built = True
        return refs.emb + self.backbone.encode_texts(texts)


def test_a_wait_behind_another_requests_build_is_waiting_not_the_methods_time(clock):
    from _cir_fakes import fake_trained_methods, make_test_engine

    with fake_trained_methods():
        engine = make_test_engine(batch_wait_ms=1)
        slow = SlowFirstUse(engine.memo, clock, engine.batch)
        engine.methods.install(slow.name, slow)
        ref, edit = engine.view.reference_from_row(3), "Make the square blue."
        out = {}

        def first():
            out["a"] = engine.compare(ref, edit, k=3, methods=[slow.name, "pact"], progression=False)

        a = threading.Thread(target=first)
        a.start()
        assert slow.entered.wait(60)  # A's texts are encoded; its slow method builds on the worker
        out["b"] = engine.compare(ref, edit, k=3, methods=["pact"], progression=False)  # queued behind it
        a.join(60)
    ra, rb = out["a"], out["b"]
    sa, pact_b = ra.methods[0], rb.methods[0]
    assert sa.ok and pact_b.ok and len(pact_b.hits) == 3
    # the build is A's method's one-time build, apart from its compose
    assert sa.build_ms >= HOUR * 1000 and sa.compose_ms < HOUR * 1000 / 10
    assert ra.timings["build"] >= HOUR * 1000 and ra.timings["compose"] < HOUR * 1000 / 10
    # B waited behind it: charged as waiting, not as PACT's compose
    assert pact_b.wait_ms >= HOUR * 1000 and pact_b.compose_ms < HOUR * 1000 / 10 and pact_b.build_ms == 0
    assert rb.timings["wait"] >= HOUR * 1000 and rb.timings["compose"] < HOUR * 1000 / 10
    assert rb.timings["total"] >= HOUR * 1000  # the wall time is what the user waited
    d = rb.to_dict()["methods"][0]
    assert d["wait_ms"] == pact_b.wait_ms and "build_ms" in d
    # while it built, the build was listed with n/N and an ETA
    assert any("fake caption bank: 2/4 captions" in line and "left" in line for lines in slow.seen for line in lines)
    assert not any("fake caption bank" in t.desc for t in running())


def test_without_batching_a_build_in_the_requests_own_thread_is_still_a_build(clock):
    from _cir_fakes import fake_trained_methods, make_test_engine

    class BuildsInline(Method):
        name, label, built = "builds-inline", "Builds inline", False

        def _compose(self, refs, texts):
            if not self.built:
                with timing.one_time_build("inline build", total=1):
                    clock.offset += HOUR
                self.built = True
            return refs.emb + self.backbone.encode_texts(texts)

    with fake_trained_methods():
        engine = make_test_engine()
        engine.methods.install(BuildsInline.name, BuildsInline(engine.memo))
        ref = engine.view.reference_from_row(2)
        first = engine.compare(ref, "Add a red star.", k=2, methods=[BuildsInline.name], progression=False)
        again = engine.compare(ref, "Add a red star.", k=2, methods=[BuildsInline.name], progression=False)
    assert first.methods[0].build_ms >= HOUR * 1000 and first.methods[0].compose_ms < HOUR * 100
    assert again.methods[0].build_ms == 0 and again.timings["build"] == 0 and again.timings["wait"] == 0
    np.testing.assert_array_equal([h.row for h in first.methods[0].hits], [h.row for h in again.methods[0].hits])
