"""studies.progression_failures: the per-step breakdown of the prefix progression, and the
query-level grouped rate it uses (cir_core.stats.rate_by_group)."""
import numpy as np
import pytest

from cir_core.errors import InputError
from cir_core.metrics import progression_summary
from cir_core.stats import rate_by_group
from studies.progression_failures import breakdown, method_breakdown, step_table


def test_step_table_lists_every_real_step_by_hand():
    ranks = np.array([[10, 5, 7, 7], [3, 3, 3, 3], [50, 2, 2, 2]])  # shorter queries repeat their last
    n = np.array([4, 1, 2])
    fams = [["x", "pose", "scene", "pose"], ["x"], ["x", "relation"]]
    t = step_table(ranks, n, fams)
    assert t["query"].tolist() == [0, 0, 0, 2]
    assert t["family"].tolist() == ["pose", "scene", "pose", "relation"]
    assert t["before"].tolist() == [10, 5, 7, 50] and t["after"].tolist() == [5, 7, 7, 2]
    assert t["k"].tolist() == [1, 2, 3, 1]  # sentences 1 -> 1..2, 1..2 -> 1..3, 1..3 -> 1..4; 1 -> 1..2
    out = breakdown(t, n_boot=200)
    assert out["steps"] == 4 and out["improved_or_held"] == 0.75  # 10->5, 7->7, 50->2 hold; 5->7 worsens
    assert out["by_family"]["pose"]["improved_or_held"] == 1.0 and out["by_family"]["scene"]["improved_or_held"] == 0.0
    assert out["by_rank_before"]["1-9"] == {"steps": 2, "improved_or_held": 0.5, "ci95": out["by_rank_before"]["1-9"]["ci95"]}
    assert out["worsened"] == 1 and out["median_worsening_factor"] == round(8 / 6, 3)
    # by place: both 1 -> 2 steps hold (10->5, 50->2), the 2 -> 3 step worsens (5->7), 3 -> 4 holds (7->7)
    assert {b: (v["steps"], v["improved_or_held"]) for b, v in out["by_step"].items()} == \
        {"1->2": (2, 1.0), "2->3": (1, 0.0), "3+": (1, 1.0)}
    # without pose: the scene step (worsened) and the relation step (improved)
    assert out["without_family"]["pose"]["steps"] == 2 and out["without_family"]["pose"]["improved_or_held"] == 0.5
    assert out["without_family"]["scene"]["improved_or_held"] == 1.0
    # the overall rate is the benchmark's own step rate on the same ranks
    assert out["improved_or_held"] == progression_summary(ranks, n)["step_improved_or_held"]


def test_a_family_list_that_does_not_fit_is_named():
    with pytest.raises(InputError, match="query row 1 has 3 steps but 2 sentence families"):
        step_table(np.zeros((2, 3)), np.array([2, 3]), [["a", "b"], ["a", "b"]])
    with pytest.raises(InputError, match="do not fit"):
        step_table(np.zeros((2, 3)), np.array([2]), [["a", "b"]])


def test_rate_by_group_resamples_queries_not_observations():
    rng = np.random.default_rng(0)
    # 40 queries, 25 observations each; the outcome is the query's (all ok or all not)
    q = np.repeat(np.arange(40), 25)
    ok = np.repeat(rng.random(40) < 0.5, 25)
    g = np.zeros_like(q)
    (row,) = rate_by_group(q, g, ok, 1, n_boot=1000)
    assert row["n"] == 1000 and row["ci95"][0] <= row["rate"] <= row["ci95"][1]
    # treated as 1000 independent observations the interval would be about 5x narrower
    assert row["ci95"][1] - row["ci95"][0] > 0.2
    empty = rate_by_group(q, g, ok, 2, n_boot=100)[1]
    assert empty == {"n": 0, "rate": None, "ci95": None}
    with pytest.raises(InputError, match="groups in"):
        rate_by_group(q, g + 2, ok, 2)


def test_method_breakdown_end_to_end_equals_the_benchmark(tiny_backbone, small_bench, tmp_path):
    from cir_core.benchmarks.world import WorldEval
    from cir_core.eval.loop import embed_benchmark
    from cir_core.methods import create_method

    bench = WorldEval(small_bench, 64, True)
    data = embed_benchmark(bench, tiny_backbone, tmp_path / "cache", False)
    out = method_breakdown(bench, create_method("sum", tiny_backbone), data, n_boot=200)
    multi = [q for q in small_bench.queries if len(q.sentences) > 1]
    assert multi and out["steps"] == sum(len(q.sentences) - 1 for q in multi)
    assert sum(v["steps"] for v in out["by_family"].values()) == out["steps"]
    assert sum(v["steps"] for v in out["by_rank_before"].values()) == out["steps"]
    # world queries are grouped by their own op (the films' family table is for film queries)
    ops = {e.op for q in multi for e in q.edits[1:]}
    assert set(out["by_family"]) == ops


def test_no_steps_is_named_not_a_type_error():
    with pytest.raises(InputError, match="no progression steps"):
        breakdown(step_table(np.zeros((2, 1)), np.array([1, 1]), [["x"], ["y"]]))


def test_a_benchmark_whose_rows_drift_is_refused(tiny_backbone, small_bench, tmp_path, monkeypatch):
    """If the benchmark ever counts other queries as multi-sentence than this module does, the
    steps would be attributed to the wrong sentences: it must refuse, not guess."""
    from cir_core.benchmarks.world import WorldEval
    from cir_core.eval.loop import embed_benchmark
    from cir_core.methods import create_method

    bench = WorldEval(small_bench, 64, True)
    data = embed_benchmark(bench, tiny_backbone, tmp_path / "cache", False)
    real = WorldEval.progression_ranks

    def drop_one(self, *a, **k):
        out = real(self, *a, **k)
        r, n = out["prefix"]
        return {"prefix": (r[1:], n[1:])}

    monkeypatch.setattr(WorldEval, "progression_ranks", drop_one)
    with pytest.raises(InputError, match="disagree on which queries count"):
        method_breakdown(bench, create_method("sum", tiny_backbone), data, n_boot=50)


def test_cli_diagnoses_a_val_candidate_with_its_own_backbone_and_checkpoint(monkeypatch, tmp_path):
    """--split, --backbone and --checkpoint reach the benchmark, the backbone and the method
    (a candidate is diagnosed on val before any test); the report records them."""
    import json
    import types

    import cir_core.backbone
    import cir_core.benchmarks
    import cir_core.eval.loop
    import cir_core.methods
    from studies import progression_failures as pf

    seen = {}
    bb = types.SimpleNamespace(id="bb-x", image_size=32)
    monkeypatch.setattr(cir_core.backbone, "load_backbone", lambda spec: seen.setdefault("backbone", spec) and bb)
    bench = types.SimpleNamespace(world=types.SimpleNamespace(queries=[None] * 7))
    monkeypatch.setattr(cir_core.benchmarks, "load_benchmark",
                        lambda name, **k: seen.setdefault("bench", (name, k["split"], k["n_films"])) and bench)
    monkeypatch.setattr(cir_core.eval.loop, "embed_benchmark", lambda bench, b: "data")
    monkeypatch.setattr(cir_core.methods, "create_method",
                        lambda name, b, folder=None: seen.setdefault("methods", []).append((name, folder)) or name)
    row = {"steps": 2, "improved_or_held": 50.0, "ci95": [0.0, 100.0], "by_family": {}, "without_family": {},
           "by_step": {}, "worsened": 1, "median_worsening_factor": 2.0}
    monkeypatch.setattr(pf, "method_breakdown", lambda *a, **k: row)
    out, ck = tmp_path / "p.json", str(tmp_path)
    pf.main(["--split", "val", "--n-films", "104", "--backbone", "local-dir:B", "--methods", "pace,sum",
             "--checkpoint", f"pace={ck}", "--json", str(out)])
    assert seen == {"backbone": "local-dir:B", "bench": ("films", "val", 104), "methods": [("pace", ck), ("sum", None)]}
    rep = json.loads(out.read_text())
    assert rep["split"] == "val" and rep["checkpoints"] == {"pace": ck} and rep["backbone"] == "bb-x"
    assert rep["n_films"] == 104 and rep["n_queries"] == 7
    pf.main(["--methods", "pace", "--json", str(out)])  # the shipped backbone: the shipped checkpoint
    assert seen["methods"][-1] == ("pace", None) and json.loads(out.read_text())["checkpoints"] == {"pace": "shipped"}


@pytest.mark.parametrize("args, message", [
    (["--checkpoint", "pace"], "takes METHOD=DIR"),
    (["--checkpoint", "=C"], "takes METHOD=DIR"),
    (["--methods", "sum", "--checkpoint", "pace=."], "not in --methods"),
    (["--methods", "pace", "--checkpoint", "pace=.", "--checkpoint", "pace=."], "names a method twice"),
    (["--methods", "sum", "--checkpoint", "sum=."], "sum takes no checkpoint"),
    (["--methods", "pace", "--checkpoint", "pace=/no/such/folder"], "no such folder"),
    (["--methods", "pace", "--backbone", "local-dir:B"], "with --backbone give --checkpoint pace=DIR"),
    (["--methods", "no-such-method"], "unknown method"),
])
def test_cli_refuses_a_checkpoint_it_cannot_use(args, message, capsys):
    """Refused before the backbone loads or the gallery is embedded, each with its own reason."""
    from studies import progression_failures as pf

    with pytest.raises(SystemExit) as e:
        pf.main(args)
    assert e.value.code == 2 and message in capsys.readouterr().err
