"""cir_core.engine: one compare request, shared encodes, marks, progression, failures per method."""
import json
import threading

import numpy as np
import pytest
from _cir_fakes import NeedsCheckpoint, fake_trained_methods, long_query, make_test_engine
from PIL import Image

from cir_core.engine import MAX_STEPS, resolve_checkpoints
from cir_core.errors import CheckpointError, ImageLoadError, InputError
from cir_core.memo import TextMemo
from cir_core.settings import is_hub_repo_id
from ui.settings import AppConfig, apply_offline_default, from_args

COLUMNS = ["pact", "dice", "pace", "compose-only"]


@pytest.fixture
def engine():
    with fake_trained_methods():
        yield make_test_engine()


class CountingBackbone:
    """Wraps a backbone and counts the images and texts it encodes."""

    def __init__(self, inner):
        self.inner, self.images, self.texts = inner, 0, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def encode_images(self, images, **kw):
        self.images += len(images)
        return self.inner.encode_images(images, **kw)

    def encode_texts(self, texts, **kw):
        self.texts += list(texts)
        return self.inner.encode_texts(texts, **kw)


def test_compare_world_query_marks_and_progression(engine):
    q, row = long_query(engine)
    res = engine.compare(engine.view.reference_from_row(row), q.text, k=5, scoring="chord")
    assert [m.name for m in res.methods] == [*COLUMNS, "sum"]
    assert all(m.ok and len(m.hits) == 5 for m in res.methods)
    assert res.query_id == q.query_id and res.target_rows  # ground truth known for a world query
    for m in res.methods:
        assert [h.rank for h in m.hits] == [1, 2, 3, 4, 5]
        assert all(h.row != row for h in m.hits)  # the reference is never retrieved
        assert all(h.is_target == (h.row in res.target_rows) for h in m.hits)
        assert all(h.same_character == (h.character == res.reference.character) for h in m.hits)
        scores = [h.score for h in m.hits]
        assert scores == sorted(scores, reverse=True)
        assert m.lam == pytest.approx(0.34)
    assert res.progression.method == "pace" and res.progression.native
    assert len(res.progression.steps) == len(q.sentences)
    assert [s.sentence for s in res.progression.steps] == list(q.sentences)
    assert set(res.timings) == {"encode", "compose", "search", "explain", "wait", "build", "total"}
    assert res.to_dict()["reference"]["item_id"] == engine.view.item_id(row)


def test_gallery_reference_is_never_encoded_and_texts_encoded_once():
    with fake_trained_methods():
        e = make_test_engine()
        counting = CountingBackbone(e.backbone)
        e.methods.memo = TextMemo(counting)  # what the methods will be built on
        q, row = long_query(e)
        res = e.compare(e.view.reference_from_row(row), q.text, k=3)
    assert all(m.ok for m in res.methods)
    assert counting.images == 0
    # every distinct text once, in one batch, however many methods and steps read it
    assert len(counting.texts) == len(set(counting.texts))
    assert q.text in counting.texts and "" in counting.texts


def test_free_text_edit_has_identity_marks_but_no_ground_truth(engine):
    ref = engine.view.reference_from_row(0)
    res = engine.compare(ref, "Make the square blue. Move the character to the left.", k=4)
    assert res.query_id is None and res.target_rows == []
    hits = res.methods[0].hits
    assert all(h.is_target is None for h in hits)
    assert all(h.same_character is not None for h in hits) and ref.character
    assert len(res.progression.steps) == 2


def test_upload_reference_encoded_once(engine, tmp_path):
    path = tmp_path / "ref.png"
    engine.view.image(5, 96).save(path)
    ref = engine.view.reference_from_upload(str(path))
    assert ref.kind == "upload" and ref.row is None and ref.character is None
    again = engine.view.reference_from_upload(str(path))
    assert again.encode_ms == 0.0 and np.array_equal(again.embedding, ref.embedding)
    res = engine.compare(ref, "Add a red star.", k=3)
    assert all(h.same_character is None and h.is_target is None for h in res.methods[0].hits)


@pytest.mark.parametrize("edit, msg", [("", "empty"), ("   \n ", "empty"), ("x" * 2001, "limit"),
                                       ("...", "no words")])
def test_bad_edits(engine, edit, msg):
    with pytest.raises(InputError, match=msg):
        engine.compare(engine.view.reference_from_row(0), edit)


def test_bad_arguments(engine):
    ref = engine.view.reference_from_row(0)
    with pytest.raises(InputError, match="k must"):
        engine.compare(ref, "Add a star.", k=0)
    with pytest.raises(InputError, match="scoring"):
        engine.compare(ref, "Add a star.", scoring="dot")
    with pytest.raises(InputError, match="no item"):
        engine.view.reference_from_id("nope/1")


def test_bad_uploads(engine, tmp_path):
    txt = tmp_path / "notes.png"
    txt.write_text("not an image")
    with pytest.raises(ImageLoadError, match="not a recognised image") as err:
        engine.view.reference_from_upload(str(txt))
    assert "'notes.png'" in str(err.value) and str(tmp_path) not in str(err.value)  # no server path
    bomb = tmp_path / "bomb.png"
    Image.new("1", (8000, 6000)).save(bomb)  # 48 Mpx, a few kB on disk
    with pytest.raises(ImageLoadError, match="exceeds"):
        engine.view.reference_from_upload(str(bomb))


def test_missing_checkpoint_is_reported_in_its_column_only():
    with fake_trained_methods(dice=NeedsCheckpoint):
        e = make_test_engine()
        res = e.compare(e.view.reference_from_row(0), "Add a red star. Make it night.", k=3)
    by = {m.name: m for m in res.methods}
    assert not by["dice"].ok and "no checkpoint" in by["dice"].error and by["dice"].hits == []
    assert all(by[n].ok and by[n].hits for n in ("pact", "pace", "compose-only", "sum"))


def test_unregistered_method_and_prefix_progression_fallback():
    with fake_trained_methods():
        from cir_core.methods import base

        order = dict(base._REGISTRY)
        base._REGISTRY.pop("pace")
        try:  # the settings name a column that this build does not register
            e = make_test_engine(methods=[*COLUMNS, "sum"])
            res = e.compare(e.view.reference_from_row(0), "Add a red star. Make it night. Turn left.", k=2)
        finally:  # back in registration order: the column order depends on it
            base._REGISTRY.clear()
            base._REGISTRY.update(order)
    by = {m.name: m for m in res.methods}
    assert "is registered in this build" in by["pace"].error
    prog = res.progression
    assert prog.method == "pact" and not prog.native
    assert "'pace' is registered" in prog.note and "prefix re-composition" in prog.note
    assert len(prog.steps) == 3


def test_a_method_that_crashes_leaves_the_others_working():
    class Broken(NeedsCheckpoint):
        name, needs_checkpoint = "pact", False

        def _compose(self, refs, texts):
            raise RuntimeError("boom")

    with fake_trained_methods(pact=Broken):
        e = make_test_engine()
        res = e.compare(e.view.reference_from_row(0), "Add a star.", k=2)
    assert "boom" in res.methods[0].error and all(m.ok for m in res.methods[1:])


def test_progression_is_capped(engine):
    text = " ".join(f"Step number {i} here." for i in range(MAX_STEPS + 3))
    res = engine.compare(engine.view.reference_from_row(0), text, k=2)
    assert len(res.progression.steps) == MAX_STEPS and f"of {MAX_STEPS + 3}" in res.progression.note


def test_search_examples_and_queries(engine):
    assert len(engine.view.search("")) == len(engine.view.gallery)
    name = engine.view.character(0)
    rows = engine.view.search(name.lower())
    assert 0 in rows and all(name in (engine.view.character(r) or "") or name in engine.view.caption(r) for r in rows)
    assert engine.view.search(engine.view.item_id(7)) == [7]
    ex = engine.view.example_queries()
    assert len(ex) == 6 and len(ex[0].sentences) >= 2
    with pytest.raises(InputError, match="no query .test-99999. in this benchmark"):
        engine.view.query("test-99999")


def test_checkpoint_sources(tmp_path, monkeypatch):
    assert resolve_checkpoints(str(tmp_path), ["pact"]).folder == tmp_path
    missing = resolve_checkpoints(str(tmp_path / "nope"), ["pact"])
    assert missing.folder is None and "not found" in missing.error
    assert is_hub_repo_id("org/cir-checkpoints") and is_hub_repo_id("hf-hub:org/x")
    assert not is_hub_repo_id(str(tmp_path)) and not is_hub_repo_id("./x/y")
    hub = resolve_checkpoints("someone/cir-ckpts-that-do-not-exist", ["pact", "dice"])
    assert hub.folder is None and "could not fetch" in hub.error and "someone/cir-ckpts" in hub.error
    with pytest.raises(CheckpointError, match="could not fetch"):
        hub.folder_for("pact")


def test_config_flags_env_and_offline(monkeypatch):
    cfg = from_args(["--world-queries", "40", "--port", "7999", "--unknown-flag"],
                    env={"CIR_GALLERY": "/data/frames", "CIR_PORT": "1", "CIR_DB": "x.sqlite"})
    assert (cfg.world_queries, cfg.port, cfg.gallery, cfg.db) == (40, 7999, "/data/frames", "x.sqlite")
    assert AppConfig(backbone="hf-hub:org/model").uses_hub() and not AppConfig().uses_hub()
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("MPLBACKEND", raising=False)
    apply_offline_default(AppConfig())
    import os
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["MPLBACKEND"] == "agg"  # else gradio's first request imports pyplot
    monkeypatch.setenv("MPLBACKEND", "svg")
    apply_offline_default(AppConfig())
    assert os.environ["MPLBACKEND"] == "svg"  # the user's choice wins


@pytest.mark.parametrize("scoring", ["cosine", "chord"])
def test_batched_search_matches_the_library_rank(engine, scoring):
    from cir_core.search import Queries, ScoreOpts, Searcher, rank

    q, row = long_query(engine)
    ref = engine.view.reference_from_row(row)
    res = engine.compare(ref, q.text, k=6, scoring=scoring)
    v_r = ref.embedding[None]
    for m in res.methods:
        meth = engine.methods.get(m.name)
        qq, q0 = meth.compose(v_r, [res.edit]), meth.compose_empty(v_r)
        for searcher in (engine.searcher, Searcher.exact(engine.view.embeddings)):  # its own, and plain exact
            s, ids = rank(Queries(qq, q0, v_r), searcher, ScoreOpts(scoring).for_method(meth), 6,
                          exclude=np.array([row]))
            assert [h.row for h in m.hits] == ids[0].tolist(), (m.name, searcher)
            np.testing.assert_allclose([h.score for h in m.hits], s[0], rtol=1e-5, atol=1e-6)


def test_small_gallery_is_scored_exactly():
    from _cir_fakes import backbone, world

    from cir_core.engine import Engine

    bench, gallery, emb = world()
    with fake_trained_methods():
        e = Engine.from_embeddings(backbone(), emb[:50])
        res = e.compare(e.view.reference_from_row(3), "Add a star. Make it night.", k=4)
    assert all(m.ok and len(m.hits) == 4 and 3 not in [h.row for h in m.hits] for m in res.methods)
    assert len(res.progression.steps) == 2 and all(len(s.hits) == 4 for s in res.progression.steps)


def test_q_empty_is_computed_once_per_reference(engine):
    calls = []
    m = engine.methods.get("pact")
    orig = m.compose_empty
    m.compose_empty = lambda ref: calls.append(1) or orig(ref)
    try:
        ref = engine.view.reference_from_row(11)
        engine.compare(ref, "Add a star.", k=2, methods=["pact"], progression=False, explained=False)
        assert calls == []  # cosine does not read q_∅, so it is not computed
        res = engine.compare(ref, "Add a star.", k=2, methods=["pact"], progression=False)
        assert calls == [1] and res.methods[0].hits[0].why is not None  # the "why" reads it: once
        engine.compare(ref, "Add a star.", k=2, scoring="chord", methods=["pact"], progression=False)
        engine.compare(ref, "Remove the star.", k=2, scoring="chord", methods=["pact"], progression=False)
    finally:
        del m.compose_empty
    assert len(calls) == 1


def test_folder_and_manifest_galleries(tmp_path):
    from cir_core.engine import load_engine

    folder = tmp_path / "frames"
    folder.mkdir()
    for i, colour in enumerate(["red", "green", "blue", "white", "black"]):
        Image.new("RGB", (40 + i, 30), colour).save(folder / f"f{i}.png")
    seen = []
    cfg = AppConfig(backbone="cir-tiny-vit", gallery=str(folder), cache_dir=str(tmp_path / "c"))
    e = load_engine(cfg, progress_cb=lambda done, total: seen.append((done, total)))
    assert seen[0] == (0, 5) and seen[-1] == (5, 5)  # the first build reports its progress
    res = e.compare(e.view.reference_from_id("f1.png"), "Make it blue.", k=3, methods=["sum"])
    assert [h.is_target for h in res.methods[0].hits] == [None] * 3
    assert res.methods[0].hits[0].same_character is None and e.view.example_queries() == []
    seen.clear()
    load_engine(cfg, progress_cb=lambda d, t: seen.append((d, t)))
    assert seen == []  # a restart encodes nothing
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("\n".join(json.dumps({"path": f"frames/f{i}.png", "id": f"shot{i}",
                                              "character": "Ann" if i < 3 else "Bob"}) for i in range(5)))
    e = load_engine(AppConfig(backbone="cir-tiny-vit", gallery=str(manifest), cache_dir=str(tmp_path / "c")))
    hits = e.compare(e.view.reference_from_id("shot0"), "Make it blue.", k=4, methods=["sum"]).methods[0].hits
    assert all(h.same_character == (h.character == "Ann") for h in hits)
    assert e.view.search("bob") == [3, 4]


def test_an_edit_longer_than_the_text_context_is_never_cut_silently(engine):
    ref = engine.view.reference_from_row(0)
    short = engine.compare(ref, "Make the square blue.", k=3)
    assert short.notes == [] and short.to_dict()["notes"] == []
    ctx = engine.backbone.context_length
    sentences = [f"Add a small red circle number {i} at the top." for i in range(12)]
    res = engine.compare(ref, " ".join(sentences), k=3)
    n = engine.backbone.token_count(" ".join(sentences))
    assert n > ctx and len(res.notes) == 1
    assert f"{n} tokens" in res.notes[0] and f"reads {ctx}" in res.notes[0]
    assert "Every sentence fits" in res.notes[0]
    from ui.results import status_line
    assert "⚠" in status_line(res) and "text tower reads" in status_line(res)


def test_the_int8_filter_is_built_for_large_exact_galleries_only():
    from _cir_fakes import backbone

    from cir_core.engine import Engine

    bb = backbone()
    g = np.random.default_rng(0).standard_normal((20_000, bb.dim)).astype(np.float32)
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    with fake_trained_methods():
        big = Engine.from_embeddings(bb, g, index_kind="flat")
        assert big.searcher.prefilter is not None and big.searcher.prefilter.n == len(g)
        res = big.compare(big.view.reference_from_row(7), "Add a star.", k=5, methods=["sum"], progression=False)
        from cir_core.search import Queries, ScoreOpts, Searcher, rank
        q = big.methods.get("sum").compose(g[7:8], ["Add a star."])
        want = rank(Queries(q), Searcher.exact(g), ScoreOpts("cosine"), 5, exclude=np.array([7]))
        assert [h.row for h in res.methods[0].hits] == want.ids[0].tolist()
        assert big.searcher.kind == "exact+int8" and big.searcher.index is None  # no FAISS copy of the rows
        assert Engine.from_embeddings(bb, g[:2000]).searcher.kind == "exact"  # the rule would never take it
        hnsw = Engine.from_embeddings(bb, g, index_kind="hnsw").searcher
        assert hnsw.kind == "approximate" and hnsw.prefilter is None
        # the app's start: the filter comes after, in a thread; the exact search answers meanwhile
        late = Engine.from_embeddings(bb, g, filter_in_background=True)
        first = late.compare(late.view.reference_from_row(7), "Add a star.", k=5, methods=["sum"], progression=False)
        assert [h.row for h in first.methods[0].hits] == want.ids[0].tolist()
        for t in [t for t in threading.enumerate() if t.name == "cir-int8-filter"]:
            t.join()
        assert late.searcher.kind == "exact+int8" and late.searcher.prefilter.n == len(g)
