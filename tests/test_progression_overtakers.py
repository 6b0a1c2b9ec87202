"""studies.progression_overtakers: who overtakes the final ground truth when a sentence is added."""
import numpy as np
import pytest


def test_newcomers_by_kind_by_hand():
    from studies.progression_overtakers import newcomer_kinds

    keys = [{1: "a"}, {1: "b"}, {2: "a"}, {}, {1: "a", 2: "b"}]
    # rows 0, 2, 3, 4 are new above the ground truth (row 1 was there before): actor 1 in state "a"
    # at 0 and 4 (prefix answers), row 2 shows actor 2 only, row 3 nobody credited
    got = newcomer_kinds(np.array([1]), np.array([0, 1, 2, 3, 4]), keys, 1, "a")
    assert got == {"prefix answer": 2, "character": 0, "no character": 2}
    assert newcomer_kinds(np.array([0]), np.array([0, 1]), keys, 1, "a") == \
        {"prefix answer": 0, "character": 1, "no character": 0}


@pytest.fixture(scope="module")
def films(tiny_backbone, tmp_path_factory):
    from cir_core.benchmarks import load_benchmark
    from cir_core.eval.loop import embed_benchmark

    bench = load_benchmark("films", split="val", n_queries=24, n_films=2, progression=True, image_size=64)
    return bench, embed_benchmark(bench, tiny_backbone, tmp_path_factory.mktemp("cache"), False)


def test_steps_and_worsened_ones_are_the_benchmarks(tiny_backbone, films):
    """Every progression step is counted once, and the worsened ones are progression_failures'
    (the ranks are recomputed with the benchmark's own scoring; a mismatch raises)."""
    from cir_core.methods import create_method
    from studies.progression_failures import method_breakdown
    from studies.progression_overtakers import method_overtakers, prefix_states

    bench, data = films
    method = create_method("sum", tiny_backbone)
    out = method_overtakers(bench, method, data)
    ref = method_breakdown(bench, method, data, n_boot=50)
    assert out["worsened"]["steps"] + out["held"]["steps"] == ref["steps"] > 0
    assert out["worsened"]["steps"] == ref["worsened"]
    assert out["worsened from the top 100"]["steps"] <= out["worsened"]["steps"]
    # the last prefix state is the target's: the chain of edits reaches it
    q = bench.films.queries[bench.progression_rows()[0]]
    assert prefix_states(q)[-1] == q.target_key


def test_rows_above_follow_the_benchmarks_tie_rule():
    from studies.progression_overtakers import rows_above

    s = np.array([0.5, 0.9, 0.5, 0.2, 0.5])
    # ground truth {2, 4}: the best is 2 (tied with 4, the lower row); 1 is higher, 0 tied and lower
    assert rows_above(s, {2, 4}, 2).tolist() == [0, 1]
    with pytest.raises(AssertionError, match="rank is 3"):
        rows_above(s, {2, 4}, 3)
