"""The reference's character marked (cir_core.character_mark) in Compare's preview and exported
figures, never on candidates; "same character" by the reference's credited cast id."""
from __future__ import annotations

import numpy as np
import pytest
from _movienet_fixtures import write_small_set
from PIL import Image

from cir_core.character_mark import BOX_RGB, CharacterMark, draw_mark, mark_from


def amber(img) -> int:
    a = np.asarray(img.convert("RGB")).astype(int)
    return int((np.abs(a - np.array(BOX_RGB)).sum(-1) < 60).sum())


def test_the_box_is_drawn_in_the_frames_resolution():
    img = Image.new("RGB", (64, 36), (0, 0, 90))
    out = draw_mark(img, CharacterMark((160, 90, 320, 180), (320, 180)))  # the right-bottom quarter
    a = np.asarray(out).astype(int)
    hit = np.argwhere(np.abs(a - np.array(BOX_RGB)).sum(-1) < 60)
    assert out.size == (455, 256)  # a small picture is enlarged first, so the box stays legible
    assert hit[:, 1].min() >= 455 // 2 - 5 and hit[:, 0].min() >= 128 - 5  # scaled into the picture
    assert amber(img) == 0 and draw_mark(img, None) is img
    assert mark_from({"box": [5, 5, 1, 9]}) is None and mark_from(None) is None
    m = mark_from({"character_box": [1, 2, 3, 4], "character_name": "Jack", "character_id": "nm1"}, [320, 180])
    assert m == CharacterMark((1.0, 2.0, 3.0, 4.0), (320, 180), "Jack", "nm1")


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from cir_core.engine import load_engine
    from cir_core.settings import EngineConfig

    root = tmp_path_factory.mktemp("mark")
    write_small_set(root, (160, 90), 12, "at night")
    cfg = EngineConfig(gallery=f"movienet:{root / 'set'}", backbone="cir-tiny-vit", methods=("sum",),
                       cache_dir=str(root / "cache"))
    return load_engine(cfg, progress_cb=None)


def test_compare_and_figures_mark_the_reference_only(engine):
    from cir_core.figures import build_panels

    v = engine.view
    ref_row = next(i for i, it in enumerate(v.gallery.items) if "reference_character" in it.meta)
    other = next(i for i, it in enumerate(v.gallery.items) if "reference_character" not in it.meta)
    assert amber(v.reference_thumbnail(ref_row, 128)) > 50 and amber(v.reference_thumbnail(other, 128)) == 0
    assert amber(v.thumbnail(ref_row, 128)) == 0  # the cached thumbnail itself stays plain
    ref = v.reference_from_row(ref_row)
    pid = v.gallery.items[ref_row].meta["reference_character"]["pid"]
    assert ref.character_pid == pid and ref.character in ("Jack", "Rose")
    res = engine.compare(ref, "at night", k=8, methods=["sum"], progression=False)
    hits = res.methods[0].hits
    assert hits and all(h.same_character == (pid in v.gallery.items[h.row].meta["character_ids"]) for h in hits)
    assert any(h.same_character for h in hits) and not all(h.same_character for h in hits)
    panel = build_panels(engine, [{"reference": v.item_id(ref_row), "text": "at night"}], ["sum"], k=3, thumb=96)[0]
    assert amber(panel.reference) > 20 and panel.title.endswith(ref.character)
    assert all(amber(c.image) == 0 for c in panel.rows[0][1])
