"""A method defined here, registered at run time with a trainer entry, and nothing else changed:
the app's Compare columns, the eval CLI, annotation pooling and the trainer registry all see it."""
from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from cir_core.methods import Method, default_columns, extra_methods, register_method, unregister_method
from cir_core.methods.base import normalise
from cir_core.methods.refs import Refs
from training.registry import Trainer, register_trainer, unregister_trainer
from training.trainers import get_trainer, list_trainers

TRAINED = []  # what the toy trainer was asked to do


class Toy(Method):
    """Half the edit, all the reference: a method nobody had to tell the workbench about."""

    name = "toy"
    label = "Toy (plugin)"
    description = "norm(v_r + 0.5·f_T(edit))"
    app_role = "column"

    def _compose(self, refs: Refs, texts: list[str]) -> np.ndarray:
        return normalise(refs.emb + 0.5 * self.backbone.encode_texts(texts))


def main(argv: list[str]) -> None:
    """The toy's trainer (build_assets calls `main(argv)` of the module its entry names)."""
    TRAINED.append(list(argv))


@pytest.fixture
def toy():
    register_method(Toy)
    register_trainer(Trainer("toy", __name__, "training/configs/toy.json", method="toy"))
    try:
        yield Toy
    finally:
        unregister_method("toy")
        unregister_trainer("toy")


def test_the_trainer_catalogue_and_build_assets_see_it(toy, capsys):
    from training import build_assets
    from training.trainers import main as registry_main

    assert "toy" in list_trainers() and get_trainer("toy").method == "toy"
    registry_main([])
    assert "toy" in capsys.readouterr().out
    build_assets.main(["--only", "toy"])
    assert TRAINED[-1] == ["--config", "training/configs/toy.json"]


def test_the_app_shows_it_as_a_compare_column(toy):
    from ui import build_demo
    from ui.settings import AppConfig

    assert default_columns()[-1] == "toy"
    demo = build_demo(AppConfig(world_queries=5))
    ids = {c.get("props", {}).get("elem_id") for c in demo.config["components"]}
    texts = " ".join(str(c.get("props", {}).get("value", "")) for c in demo.config["components"])
    assert "col-toy" in ids and "Toy (plugin)" in texts


def test_the_engine_ranks_it_beside_the_others(toy):
    from _cir_fakes import fake_trained_methods, long_query, make_test_engine

    with fake_trained_methods():
        e = make_test_engine()
        q, row = long_query(e)
        res = e.compare(e.view.reference_from_row(row), q.text, k=3)
    by = {m.name: m for m in res.methods}
    assert "toy" in e.methods.columns and by["toy"].ok and len(by["toy"].hits) == 3 and by["toy"].label == "Toy (plugin)"


def test_the_eval_cli_evaluates_it(toy, tmp_path, monkeypatch, capsys):
    from cir_core.eval import cli as ev

    monkeypatch.setenv("CIR_CACHE_DIR", str(tmp_path / "c"))
    out = tmp_path / "r.json"
    assert ev.main(["--backbone", "cir-tiny-vit", "--n-queries", "6", "--scoring", "cosine",
                    "--json", str(out)]) == 0
    assert "toy" in json.loads(out.read_text())["results"]
    assert any(line.startswith("toy ") for line in capsys.readouterr().out.splitlines())


def test_pooling_an_annotation_set_includes_it(toy, tmp_path):
    from db.pooling import main as pool

    db = tmp_path / "ann.sqlite"
    assert pool(["--name", "plugin", "--queries", "2", "--k", "2", "--scorings", "cosine",
                 "--backbone", "cir-tiny-vit", "--world-queries", "8", "--cache-dir", str(tmp_path / "c"),
                 "--db", str(db)]) == 0
    con = sqlite3.connect(db)
    methods = {m for (m,) in con.execute("SELECT DISTINCT method FROM retrieved_items")}
    con.close()
    assert "toy" in methods and "pact" in methods and "sum" not in methods  # the baseline is not pooled


def test_an_optional_method_is_offered_not_shown():
    """app_role "optional" (the zero-shot peers): an "Also compare" choice and a hidden column."""
    from ui import build_demo
    from ui.settings import AppConfig

    class Peer(Toy):
        name, label, app_role = "toy-peer", "Toy peer (optional)", "optional"

    register_method(Peer)
    try:
        assert "toy-peer" not in default_columns() and "toy-peer" in extra_methods()
        assert "toy-peer" not in extra_methods(("pact", "toy-peer"))
        demo = build_demo(AppConfig(world_queries=5))
        comps = {c.get("props", {}).get("elem_id"): c for c in demo.config["components"]}
        choices = comps["extra-methods"]["props"]["choices"]
        assert ["Toy peer (optional)", "toy-peer"] in [list(ch) for ch in choices]
        assert "col-toy-peer" in comps
    finally:
        unregister_method("toy-peer")
