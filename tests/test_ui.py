"""The app's handler functions, called directly (no server): Compare and Figures tabs."""
import json

import pytest
from _cir_fakes import NeedsCheckpoint, fake_trained_methods, long_query, make_test_engine, plain
from PIL import Image

from ui import banner, build_demo
from ui.common import hit_caption, mark
from ui.compare import NO_REFERENCE, PAGE_SIZE, compare_view, page_view, select_example, select_from_page, upload_view
from ui.figures import CURRENT, LISTED, export_view
from ui.settings import AppConfig

EDIT = "Make the square blue. Move the character to the left."


@pytest.fixture(scope="module")
def engine():
    with fake_trained_methods():
        e = make_test_engine()
        e.methods.available()  # build every method while the fakes are registered
    return e


def test_gallery_page_click_then_compare(engine):
    items, label, rows, page = page_view(engine, "", 0)
    assert len(items) == PAGE_SIZE and "of 240 images" in label and page == 0
    items2, _, rows2, page2 = page_view(engine, "", 1)
    assert page2 == 1 and rows2[0] == PAGE_SIZE
    ref_id, preview, info = select_from_page(engine, rows2, 3)
    assert ref_id == engine.view.item_id(PAGE_SIZE + 3) and preview.size == (256, 256) and ref_id in info
    view = compare_view(engine, ref_id, None, EDIT, k=4, scoring="Chord")
    assert view.error is None and "Reference" in view.status
    assert len(view.columns) == 5
    for header, items in view.columns:
        assert "λ 0.34" in header and len(items) == 4
        assert all(isinstance(im, Image.Image) and cap.startswith("#") for im, cap in items)
    assert len(view.steps) == 2 and "sentences 1–2" in view.steps[1][0]
    assert "Move the character" in view.steps[1][0]
    assert view.timings.startswith("Time: encode") and "total" in view.timings
    assert "PACE progression" in view.progression_header
    json.dumps(view.details)  # the raw-result panel must serialise


def test_search_and_paging_clamp(engine):
    name = engine.view.character(0)
    items, label, rows, _ = page_view(engine, name, 0)
    assert rows and name in label
    _, label, rows, _ = page_view(engine, "zzz-no-such-thing", 0)
    assert rows == [] and "No image matches" in label
    _, _, _, page = page_view(engine, "", 999)
    assert page == (len(engine.view.gallery) - 1) // PAGE_SIZE


def test_example_query_has_ground_truth_marks(engine):
    ids = [q.query_id for q in engine.view.example_queries()]
    ref_id, text, _, _ = select_example(engine, ids, 0)
    view = compare_view(engine, ref_id, None, text, k=8)
    assert "world query" in view.status
    res = view.details
    hits = [h for m in res["methods"] for h in m["hits"]]
    targets = [h for h in hits if h["is_target"]]
    # captions and thumbnails agree with the marks
    for (_header, items), m in zip(view.columns, res["methods"]):
        for (_img, cap), h in zip(items, m["hits"]):
            assert ("✓ target" in cap) == bool(h["is_target"])
    if targets:  # a green frame is drawn on the thumbnail of a hit target
        img = mark(Image.new("RGB", (64, 64), "white"), True, False)
        assert img.getpixel((0, 0)) == (26, 150, 65) and img.getpixel((32, 32)) == (255, 255, 255)


def test_upload_then_compare(engine, tmp_path):
    path = tmp_path / "photo.png"
    engine.view.image(9, 200).save(path)
    preview, info = upload_view(engine, str(path))
    assert "upload: photo.png" in plain(info) and "Character unknown" in info
    view = compare_view(engine, "", str(path), EDIT, k=3)
    assert view.error is None and "Uploaded reference" in view.status
    assert all(len(items) == 3 for _, items in view.columns)


def test_errors_are_messages_not_exceptions(engine, tmp_path):
    ref = engine.view.item_id(0)
    empty = compare_view(engine, ref, None, "   ")
    assert empty.error and empty.status.startswith("⚠") and "empty" in empty.status
    assert all(items == [] for _, items in empty.columns) and len(empty.columns) == 5
    long = compare_view(engine, ref, None, "word " * 1000)  # cut to the limit, and said so
    assert long.error is None and len(long.edit) <= 2000 and long.edit.endswith("word")
    assert "4,999 characters; the limit is 2,000" in plain(long.status)
    assert any("4,999 characters" in n for n in long.details["notes"])
    no_ref = compare_view(engine, "", None, EDIT)
    assert NO_REFERENCE in plain(no_ref.status)
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\x00garbage" * 10)
    view = compare_view(engine, "", str(bad), EDIT)
    assert "bad.jpg" in plain(view.status) and "not a recognised image" in view.status
    bomb = tmp_path / "bomb.png"
    Image.new("1", (9000, 5000)).save(bomb)
    view = compare_view(engine, "", str(bomb), EDIT)
    assert "exceeds the limit" in view.status and "bomb.png" in plain(view.status)
    unknown = compare_view(engine, "test/999999", None, EDIT)
    assert "no item" in unknown.status


def test_missing_checkpoint_column_message():
    with fake_trained_methods(dice=NeedsCheckpoint):
        e = make_test_engine()
        view = compare_view(e, e.view.item_id(0), None, EDIT, k=3)
    heads = dict(zip(["pact", "dice", "pace", "compose-only", "sum"], view.columns))
    assert "no checkpoint" in heads["dice"][0] and heads["dice"][1] == []
    assert all(len(heads[n][1]) == 3 for n in ("pact", "pace", "compose-only", "sum"))
    assert "Unavailable: DiCE" in view.status
    assert "⚠ DiCE" in banner(e)


def test_real_registry_columns_render_results_or_a_reason():
    """Whatever is trained right now: every column has results or says why not."""
    e = make_test_engine(checkpoints=None)
    view = compare_view(e, e.view.item_id(0), None, EDIT, k=2)
    for header, items in view.columns:
        assert len(items) == 2 or "⚠" in header
    assert view.steps  # some method always provides the progression (the sum baseline at least)


def test_hit_caption():
    class H:
        rank, score, is_target, character, same_character = 1, 0.73123, True, "Ada", True

    assert hit_caption(H) == "#1 · 0.731 · ✓ target\nAda (same)"
    H.item_id = "test/000123"
    assert hit_caption(H, "▲2") == "#1 · 0.731 · ✓ target · ▲2\ntest/000123\nAda (same)"


def test_figure_export_current_and_listed(engine, tmp_path):
    q, row = long_query(engine)
    view = export_view(engine, CURRENT, "", engine.view.item_id(row), None, q.text, ["pact", "dice"], k=3,
                       out_dir=tmp_path)
    assert view.error is None and view.preview.size[0] > 300
    png, pdf, js = view.files
    assert open(pdf, "rb").read(5) == b"%PDF-" and Image.open(png).size == view.preview.size
    spec = json.loads(open(js).read())
    assert spec["queries"] == [{"reference": engine.view.item_id(row), "text": q.text}]
    assert spec["methods"] == ["pact", "dice"] and spec["k"] == 3
    ids = [x.query_id for x in engine.view.example_queries()[:2]]
    view = export_view(engine, LISTED, ", ".join(ids), "", None, "", ["pace"], k=2, out_dir=tmp_path / "b")
    assert view.error is None and json.loads(open(view.files[2]).read())["queries"] == [
        {"query_id": i} for i in ids]
    bad = export_view(engine, LISTED, "[not json", "", None, "", ["pact"], out_dir=tmp_path / "c")
    assert bad.error and "not valid JSON" in bad.status
    none = export_view(engine, CURRENT, "", "", None, "", ["pact"], out_dir=tmp_path / "d")
    assert "no edit" in none.status


def test_build_demo_composes_tabs():
    demo = build_demo(AppConfig(world_queries=5))
    names = {d.get("api_name") for d in demo.config["dependencies"]}
    assert {"compare", "export_figure"} <= names
    assert demo.cir_holder.engine is None  # nothing loads before the first page view


def test_api_upload_must_come_from_the_upload_folder():
    from ui.uploads import UploadRefused, uploaded_path

    assert uploaded_path(None) is None
    with pytest.raises(UploadRefused, match="uploaded to this app"):
        uploaded_path({"path": "/etc/hostname"})


def test_engine_load_failure_is_a_message():
    from cir_core.errors import BackboneError, CIRError
    from ui.common import EngineHolder

    calls = []

    def loader(cfg, progress_cb=None):
        calls.append(1)
        raise BackboneError("unknown model 'ViT-Nope'")

    holder = EngineHolder(AppConfig(), loader=loader)
    for _ in range(2):
        with pytest.raises(CIRError, match="could not start: unknown model 'ViT-Nope'"):
            holder.get()
    assert calls == [1]  # remembered, not retried on every request


@pytest.mark.parametrize("case", ["built", "failed", "encodes"])
def test_the_collector_is_back_on_once_the_engine_is_built_or_failed(case):
    """app.py pauses the collector for the start-up; building the engine (or failing to) turns it
    back on, or every later request would run without one; so does a gallery to encode."""
    import gc

    from cir_core.errors import BackboneError
    from ui.common import EngineHolder

    def loader(cfg, progress_cb=None):
        if case == "failed":
            raise BackboneError("unknown model")
        if case == "encodes":
            progress_cb(0, 0)  # nothing to encode: the pause goes on
            assert not gc.isenabled()
            progress_cb(0, 5)
            assert gc.isenabled()  # during the encoding already
        return object()

    was = gc.isenabled()
    gc.disable()
    try:
        holder = EngineHolder(AppConfig(), loader=loader)
        try:
            holder.get()
        except BackboneError:
            assert case == "failed"
        assert gc.isenabled()
    finally:
        gc.unfreeze()  # the test process keeps its collector's view as it was
        (gc.enable if was else gc.disable)()
