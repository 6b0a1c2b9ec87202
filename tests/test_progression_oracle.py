"""studies.progression_oracle: the drawn-prefix reference point of the prefix progression."""
from dataclasses import replace

import numpy as np
import pytest

from cir_core.errors import InputError


@pytest.fixture(scope="module")
def embedded(tiny_backbone, small_bench, tmp_path_factory):
    from cir_core.benchmarks.world import WorldEval
    from cir_core.eval.loop import embed_benchmark

    bench = WorldEval(small_bench, 64, True)
    return bench, embed_benchmark(bench, tiny_backbone, tmp_path_factory.mktemp("cache"), False)


def test_the_last_drawn_prefix_is_the_target_image(tiny_backbone, embedded):
    """A world query's chain of edits ends at its target scene drawn with the target's render
    seed, so the oracle after every sentence is the target's own gallery embedding."""
    from studies.progression_oracle import oracle_steps

    bench, data = embedded
    rows = bench.progression_rows()
    steps = oracle_steps(bench.world.queries, rows, tiny_backbone, progress=False)
    assert [len(s) for s in steps] == [len(bench.world.queries[i].sentences) for i in rows]
    g = data.emb["gallery"]
    last = np.stack([s[-1] for s in steps])
    cos = np.sum(last * g[bench.truth["target"][rows]], 1)
    assert np.all(cos > 0.999), cos.min()


def test_the_breakdown_counts_every_step_and_the_last_one_finds_the_target(tiny_backbone, embedded):
    from studies.progression_oracle import oracle_breakdown, oracle_steps

    bench, data = embedded
    steps = oracle_steps(bench.world.queries, bench.progression_rows(), tiny_backbone, progress=False)
    out = oracle_breakdown(bench, tiny_backbone, data, steps, n_boot=100)
    multi = [q for q in bench.world.queries if len(q.sentences) > 1]
    assert out["steps"] == sum(len(q.sentences) - 1 for q in multi)
    assert sum(v["steps"] for v in out["by_family"].values()) == out["steps"]
    assert out["R@10_last_step"] == 1.0  # the target's own image, the reference removed


def test_a_query_without_one_sentence_per_edit_is_named(tiny_backbone, small_bench):
    from studies.progression_oracle import oracle_steps

    qs = list(small_bench.queries)
    i = next(j for j, q in enumerate(qs) if len(q.sentences) > 1)
    qs[i] = replace(qs[i], sentences=qs[i].sentences[:-1])
    with pytest.raises(InputError, match=qs[i].query_id):
        oracle_steps(qs, [i], tiny_backbone, progress=False)


def test_drawn_cosine_is_one_for_a_composer_that_draws(tiny_backbone, embedded, monkeypatch):
    """A method whose prefix queries are the drawn prefixes sits at cosine 1; `sum` does not."""
    from cir_core.methods import create_method
    from studies.progression_oracle import drawn_cosine, oracle_steps

    bench, data = embedded
    rows = bench.progression_rows()
    steps = oracle_steps(bench.world.queries, rows, tiny_backbone, progress=False)
    by_text = {bench.world.queries[i].sentences: s for i, s in zip(rows, steps)}
    drawer = create_method("sum", tiny_backbone)
    monkeypatch.setattr(drawer, "prefix_queries", lambda ref, sentences: list(by_text[tuple(sentences)]))
    out = drawn_cosine(bench, drawer, data, steps)
    assert out["prefixes"] == sum(len(s) for s in steps)
    assert out["mean_cos_to_drawn"] == pytest.approx(1.0, abs=1e-4)
    assert drawn_cosine(bench, create_method("sum", tiny_backbone), data, steps)["mean_cos_to_drawn"] < 0.999
