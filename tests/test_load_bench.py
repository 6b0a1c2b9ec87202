"""The load bench's own checks (bench/load_compare.py): an answer for another request, a method
without its k hits, a busy answer and a mixed-up top-k are each caught, and the summary's ratios
and goals are what its phases say."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from bench.load_compare import check_answer, hits_of, same_answer, summarise
from cir_core.engine import Engine


def _answer(ref: str = "v1", edit: str = "Make it blue.", k: int = 3) -> dict:
    return {"reference": {"item_id": ref}, "edit": edit, "timings": {"total": 10.0},
            "methods": [{"name": m, "error": None, "hits": [{"item_id": f"{m}-{i}"} for i in range(k)]}
                        for m in ("pact", "dice")]}


def test_check_answer_accepts_its_own_answer_only() -> None:
    good = _answer()
    assert check_answer(good, "v1", "Make it blue.", 3) == ("ok", "")
    assert check_answer(good, "v2", "Make it blue.", 3)[0] == "wrong"  # another reference's answer
    assert check_answer(good, "v1", "Make it red.", 3)[0] == "wrong"  # another edit's answer
    assert check_answer(good, "v1", "Make it blue.", 4)[0] == "wrong"  # fewer hits than asked
    failed = copy.deepcopy(good)
    failed["methods"][1]["error"] = "DiCE failed"
    status, problem = check_answer(failed, "v1", "Make it blue.", 3)
    assert status == "wrong" and "dice" in problem
    assert check_answer({**good, "methods": []}, "v1", "Make it blue.", 3)[0] == "wrong"
    assert check_answer({"error": "The workbench is busy: 3 requests ahead"}, "v1", "x", 3)[0] == "busy"
    assert check_answer({"error": "k must be between 1 and 50"}, "v1", "x", 3)[0] == "error"
    assert check_answer(["not", "json"], "v1", "x", 3)[0] == "error"


def test_same_answer_tolerates_a_near_tie_not_a_mix_up() -> None:
    a = {"pact": list("abcdefgh"), "dice": list("ijklmnop")}
    assert same_answer(a, copy.deepcopy(a))
    swapped = {"pact": list("abcdefgz"), "dice": list("ijklmnop")}  # one row rounded apart: 7 of 8
    assert same_answer(a, swapped)
    assert not same_answer(a, {"pact": list("abcdwxyz"), "dice": list("ijklmnop")})  # 4 of 8
    assert not same_answer(a, {"pact": list("abcdefgh")})  # a method missing
    assert not same_answer({}, {})


@pytest.fixture(scope="module")
def engine(tiny_backbone) -> Engine:
    g = np.random.default_rng(0).standard_normal((400, tiny_backbone.dim)).astype(np.float32)
    return Engine.from_embeddings(tiny_backbone, g / np.linalg.norm(g, axis=1, keepdims=True))


def test_another_requests_answer_is_caught_as_mixed_up(engine: Engine) -> None:
    """The verification's power: on a real engine, the answer to one (reference, edit) is not
    taken for another's, while the same request asked twice matches."""
    ask = lambda row, edit: hits_of(engine.compare(engine.view.reference_from_row(row), edit, k=8,  # noqa: E731
                                                   methods=["sum", "text-only", "image-only"]).to_dict())
    first = ask(3, "Make the square blue.")
    assert same_answer(first, ask(3, "Make the square blue."))
    assert not same_answer(first, ask(7, "Make the square blue."))  # another reference
    assert not same_answer(first, ask(3, "Add a red star to the left."))  # another edit


def _line(n: int, r: int, batching: bool, rps: float, p50: float, p95: float, cpu: float) -> dict:
    return {"clients": n, "round": r, "batching": batching, "throughput_rps": rps, "p50_s": p50, "p95_s": p95,
            "app_cpu_s_per_answer": cpu}


def test_summary_ratios_and_goals() -> None:
    lines = [_line(1, 0, True, 2.0, 0.5, 0.6, 1.0), _line(1, 0, False, 2.0, 0.5, 0.6, 1.0),
             _line(16, 0, True, 5.0, 3.0, 1.9, 0.4), _line(16, 0, False, 2.0, 8.0, 9.0, 1.0),
             _line(16, 1, False, 2.5, 8.0, 9.0, 1.0), _line(16, 1, True, 4.0, 3.0, 2.1, 0.5)]
    rows = {r["clients"]: r for r in summarise("vitb32", lines)}
    assert rows[1]["throughput_on_over_off"]["median"] == 1.0 and "goal_throughput_2x" not in rows[1]
    s = rows[16]
    assert s["throughput_on_over_off"] == {"median": 2.05, "min": 1.6, "max": 2.5}
    assert s["app_cpu_per_answer_off_over_on"] == {"median": 2.25, "min": 2.0, "max": 2.5}
    assert s["goal_throughput_2x"] is True
    assert s["p95_over_one_client_p50"] == 4.0 and s["goal_p95_4x"] is True
    slow = [dict(x, p95_s=x["p95_s"] * 2) if x["clients"] == 16 and x["batching"] else x for x in lines]
    assert summarise("vitb32", slow)[1]["goal_p95_4x"] is False
