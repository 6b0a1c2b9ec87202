"""studies.val_seeds: seed means of candidate recipes on a val benchmark, read from eval reports."""
import json

import pytest

from cir_core.errors import InputError
from studies.val_seeds import main, summarise


def report(path, r1, r10, prog, folder=None, **over):
    rep = {"benchmark": "films", "split": "val", "n_queries": 1000, "gallery_size": {"gallery": 9},
           "backbone": "bb", "results": {"pace": {"cosine": {"R@1": r1, "R@10": r10}}},
           "extra": {"pace": {"cosine": {"progression": {"prefix": {"step_improved_or_held": prog}}}}}}
    if folder is not None:
        rep["checkpoints"] = {"pace": str(folder)}
    rep.update(over)
    path.write_text(json.dumps(rep))
    return path


def export(folder, r1):
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"metrics": {"val_R@1": r1}}))
    return folder


def test_means_stds_and_differences_by_hand(tmp_path):
    a = [report(tmp_path / f"a{i}.json", r1, 0.8, p, export(tmp_path / f"ea{i}", w))
         for i, (r1, p, w) in enumerate([(0.50, 0.76, 0.70), (0.52, 0.78, 0.74)])]
    b = [report(tmp_path / f"b{i}.json", r1, 0.7, p, export(tmp_path / f"eb{i}", w))
         for i, (r1, p, w) in enumerate([(0.46, 0.80, 0.71), (0.44, 0.82, 0.73)])]
    rep = summarise({"recipe": a, "variant": b}, "pace", ("val_R@1",))
    ra, rb = rep["groups"]["recipe"], rep["groups"]["variant"]
    assert ra["mean"] == {"R@10": 80.0, "R@1": 51.0, "progression": 77.0, "val_R@1": 72.0}
    assert ra["std"]["R@1"] == pytest.approx(1.41, abs=0.01)
    assert rb["minus_first"] == {"R@10": -10.0, "R@1": -6.0, "progression": 4.0, "val_R@1": 0.0}


def test_another_instrument_is_refused_by_file_and_key(tmp_path):
    a = report(tmp_path / "a.json", 0.5, 0.8, 0.7)
    b = report(tmp_path / "b.json", 0.5, 0.8, 0.7, gallery_size={"gallery": 5})
    with pytest.raises(InputError, match=r"b\.json: gallery_size"):
        summarise({"x": [a], "y": [b]}, "pace")


def test_a_trainer_metric_needs_the_recorded_checkpoint(tmp_path, capsys):
    a = report(tmp_path / "a.json", 0.5, 0.8, 0.7)  # an older report: no checkpoints key
    with pytest.raises(InputError, match="a.json: no checkpoint folder"):
        summarise({"x": [a]}, "pace", ("val_R@1",))
    assert summarise({"x": [a]}, "pace")["groups"]["x"]["mean"]["progression"] == 70.0
    with pytest.raises(SystemExit):
        main(["--method", "dice", f"x={a}"])  # no dice result in it: named, not a KeyError
    assert "no dice/cosine result" in capsys.readouterr().err


def test_one_seed_prints_no_spread(tmp_path):
    from studies.val_seeds import lines

    one, two = report(tmp_path / "a.json", 0.5, 0.8, 0.7), report(tmp_path / "b.json", 0.52, 0.8, 0.72)
    solo = lines(summarise({"x": [one]}, "pace"))[0]
    assert "±" not in solo and "R@1 50.00" in solo
    assert "R@1 51.00 ± 1.41" in lines(summarise({"x": [one, two]}, "pace"))[0]
