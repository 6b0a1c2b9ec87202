"""cir_core.batching: concurrent calls merged into one batch per lane, each caller getting its own
rows; one bad input failing only its caller; the admission limit answering "busy, N ahead"; the
encoder and method wrappers equal to what they wrap."""
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from cir_core.batching import Admission, BatchedEncoder, BatchQueue, Busy
from cir_core.engine.batched import BatchedMethod, stack_refs
from cir_core.methods.refs import Refs


def run_together(n, call):
    """`call(i)` from `n` threads released at once; their results in order."""
    start = threading.Barrier(n)

    def go(i):
        start.wait()
        return call(i)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(go, range(n)))


def test_concurrent_calls_share_one_batch_and_get_their_own_rows():
    seen = []
    q = BatchQueue(max_wait_s=30.0, company=lambda: 8)  # all 8 are expected: the batch waits for them

    def double(items):
        seen.append(list(items))
        return [2 * x for x in items]

    got = run_together(8, lambda i: q.run("lane", double, [10 * i, 10 * i + 1]))
    assert got == [[20 * i, 20 * i + 2] for i in range(8)]
    assert len(seen) == 1 and sorted(seen[0]) == sorted(x for i in range(8) for x in (10 * i, 10 * i + 1))
    assert (q.stats.batches, q.stats.tickets, q.stats.items, q.stats.largest) == (1, 8, 16, 8)


def test_a_lone_caller_does_not_wait_for_company_and_lanes_stay_apart():
    q = BatchQueue(max_wait_s=3600.0)  # company() is 1: nobody else can join, so no waiting
    assert q.run("a", lambda xs: [x + 1 for x in xs], [1, 2]) == [2, 3]
    assert q.run("b", lambda xs: [-x for x in xs], [5]) == [-5]
    assert q.run("a", lambda xs: [x + 1 for x in xs], []) == []
    assert q.stats.batches == 2


def test_max_items_splits_a_batch():
    sizes = []
    q = BatchQueue(max_wait_s=30.0, max_items=4, company=lambda: 6)
    run_together(6, lambda i: q.run("x", lambda xs: sizes.append(len(xs)) or xs, [i, i]))
    assert sum(sizes) == 12 and max(sizes) <= 4


def test_one_bad_input_fails_only_its_own_caller():
    q = BatchQueue(max_wait_s=30.0, company=lambda: 4)

    def fn(items):
        if "bad" in items:
            raise ValueError("bad item")
        return [s.upper() for s in items]

    def call(i):
        try:
            return q.run("t", fn, ["bad" if i == 2 else f"ok{i}"])
        except ValueError as exc:
            return str(exc)

    assert run_together(4, call) == [["OK0"], ["OK1"], "bad item", ["OK3"]]


def test_a_batch_that_calls_back_in_runs_inline():
    q = BatchQueue()
    outer = q.run("outer", lambda xs: [q.run("inner", lambda ys: [y * 3 for y in ys], xs)[0]], [7])
    assert outer == [21]  # no deadlock on the worker waiting for itself


def test_a_wrong_number_of_results_is_an_error():
    with pytest.raises(RuntimeError, match="2 items gave 1 results"):
        BatchQueue().run("x", lambda xs: xs[:1], [1, 2])


def test_admission_says_busy_with_how_many_are_ahead():
    gate = Admission(2)
    inside, release = threading.Barrier(3), threading.Event()

    def hold():
        with gate.enter():
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=hold) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    with pytest.raises(Busy, match="busy: 2 requests ahead of yours") as err:
        with gate.enter():
            pass
    assert err.value.ahead == 2
    release.set()
    for t in threads:
        t.join()
    with gate.enter():  # re-entrant: the same thread counts once
        with gate.enter():
            assert gate.active == 1
    assert gate.active == 0


def test_batched_encoder_equals_the_backbone(tiny_backbone):
    from cir_core.world import build_benchmark

    q = BatchQueue(max_wait_s=30.0, company=lambda: 3)
    enc = BatchedEncoder(tiny_backbone, q)
    texts = [["Make it blue.", ""], ["Add a star.", "Make it blue."], ["Night."]]
    got = run_together(3, lambda i: enc.encode_texts(texts[i]))
    for t, g in zip(texts, got):
        np.testing.assert_allclose(g, tiny_backbone.encode_texts(t), atol=1e-5)
    assert q.stats.largest == 3 and enc.dim == tiny_backbone.dim and enc.id == tiny_backbone.id
    bench = build_benchmark("test", 2)
    imgs = [bench.items[i].image(64) for i in range(3)]
    emb, norms = enc.encode_images(imgs, with_norms=True)
    want, want_n = tiny_backbone.encode_images(imgs, with_norms=True)
    np.testing.assert_allclose(emb, want, atol=1e-5)
    np.testing.assert_allclose(norms, want_n, rtol=1e-5)
    assert enc.encode_texts([]).shape == (0, tiny_backbone.dim)


def test_batched_method_equals_the_method(tiny_backbone):
    from cir_core.methods import create_method

    m = create_method("sum", tiny_backbone, None)
    q = BatchQueue(max_wait_s=30.0, company=lambda: 4)
    bm = BatchedMethod(m, q)
    rng = np.random.default_rng(0)
    refs = [Refs(r / np.linalg.norm(r), np.array([2.0], np.float32))
            for r in rng.standard_normal((4, 1, tiny_backbone.dim)).astype(np.float32)]
    texts = ["Add a star.", "Make it night.", "", "Move it left."]
    got = run_together(4, lambda i: bm.compose_pair(refs[i], texts[i]))
    for r, t, (qq, q0) in zip(refs, texts, got):
        np.testing.assert_allclose(qq, m.compose(r, [t]), atol=1e-5)
        np.testing.assert_allclose(q0, m.compose_empty(r), atol=1e-5)
    assert q.stats.largest == 4 and bm.name == "sum" and bm.label == m.label
    with pytest.raises(Exception, match="2 references but 1 edit texts"):
        bm.compose(stack_refs(refs[:2]), ["x"])
    mixed = stack_refs([refs[0], Refs(refs[1].emb)])
    assert np.isnan(mixed.norms[1]) and mixed.norms[0] == 2.0


def test_the_engine_answers_busy_past_its_limit():
    from _cir_fakes import fake_trained_methods, make_test_engine

    with fake_trained_methods():
        engine = make_test_engine()
        engine.admission.capacity = 1
        entered, release = threading.Event(), threading.Event()

        def hold():
            with engine.admit():
                entered.set()
                release.wait()

        t = threading.Thread(target=hold)
        t.start()
        entered.wait()
        try:
            with pytest.raises(Busy, match="1 request ahead of yours"):
                engine.compare(engine.view.reference_from_row(1), "Add a star.", k=2)
            from ui.results import compare_api

            assert "busy: 1 request ahead" in compare_api(engine, engine.view.item_id(1), "Add a star.")["error"]
        finally:
            release.set()
            t.join()
        assert engine.compare(engine.view.reference_from_row(1), "Add a star.", k=2).methods[0].ok
