"""bench/report_diff.py: two reports compared leaf by leaf, run-dependent fields left out."""
import json

from bench.report_diff import diff, main

REPORT = {"benchmark": "world", "results": {"pace": {"cosine": {"R@1": 0.775, "R@10": 0.995}}},
          "seconds": {"pace": {"compose": 1.1}}, "edges": [0.1, 0.25], "skipped": {}}


def test_identical_reports_pass_whatever_their_timings():
    other = json.loads(json.dumps(REPORT))
    other["seconds"]["pace"]["compose"] = 9.9
    d = diff(REPORT, other)
    assert d == {"compared": 5, "only_a": [], "only_b": [], "differ": []}


def test_every_kind_of_difference_is_named():
    other = json.loads(json.dumps(REPORT))
    other["results"]["pace"]["cosine"]["R@1"] = 0.775000001  # exact, not within a tolerance
    other["edges"].append(0.5)
    del other["benchmark"]
    other["results"]["pace"]["cosine"]["R@10"] = 1  # int for float: a different leaf
    d = diff(REPORT, other)
    assert d["only_a"] == ["benchmark"] and d["only_b"] == ["edges/2"]
    assert d["differ"] == [("results/pace/cosine/R@1", 0.775, 0.775000001), ("results/pace/cosine/R@10", 0.995, 1)]


def test_cli_exit_status(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(REPORT))
    b.write_text(json.dumps(REPORT))
    assert main([str(a), str(b)]) == 0
    b.write_text(json.dumps({**REPORT, "benchmark": "films"}))
    assert main([str(a), str(b)]) == 1 and "benchmark: 'world' -> 'films'" in capsys.readouterr().out
