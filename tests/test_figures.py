"""cir_core.figures: the grid renderer (arrays in, image out), query lists, the CLI."""
import json

import numpy as np
import pytest
from _cir_fakes import N_QUERIES, cache_root
from PIL import Image

from cir_core.errors import InputError
from cir_core.figures import Cell, Panel, main, parse_entries, render, save, to_image


def _panel(k=3, rows=2):
    rng = np.random.default_rng(0)
    img = lambda: (rng.random((32, 32, 3)) * 255).astype(np.uint8)  # noqa: E731
    cells = [Cell(img(), 0.9 - 0.1 * j, target=j == 1, same_character=j == 0) for j in range(k)]
    return Panel(Image.fromarray(img()), "Make the square blue. Move the character to the left.",
                 "test-00001 · Ada", [("PACT", cells)] * (rows - 1) + [("DiCE", "no checkpoint")])


def test_render_marks_and_sizes(tmp_path):
    fig = render([_panel(), _panel(k=4, rows=3)])
    img = to_image(fig)
    assert img.mode == "RGB" and img.width > img.height / 2
    arr = np.asarray(img).reshape(-1, 3)
    assert ((arr == (26, 150, 65)).all(1)).sum() > 50  # the ground-truth frame is drawn
    assert ((arr == (33, 102, 172)).all(1)).sum() > 10  # the same-character dot too
    plain = np.asarray(to_image(render([_panel()], marks=False))).reshape(-1, 3)
    assert ((plain == (26, 150, 65)).all(1)).sum() == 0
    assert save(fig, tmp_path / "f.pdf").read_bytes()[:5] == b"%PDF-"
    assert Image.open(save(fig, tmp_path / "f.png")).size == img.size
    with pytest.raises(InputError, match="png or .pdf"):
        save(fig, tmp_path / "f.gif")
    with pytest.raises(InputError, match="at least one"):
        render([])


@pytest.mark.parametrize("spec, want", [
    ("test-00001, test-00002", [{"query_id": "test-00001"}, {"query_id": "test-00002"}]),
    ('["test-00003"]', [{"query_id": "test-00003"}]),
    ('{"queries": [{"reference": "test/000001", "text": "Add a star."}]}',
     [{"reference": "test/000001", "text": "Add a star."}]),
])
def test_parse_entries(spec, want):
    assert parse_entries(spec) == want


@pytest.mark.parametrize("spec, msg", [("", "no queries"), ("[1", "not valid JSON"), ("[]", "empty"),
                                       ('[{"reference": "a"}]', "no edit"), ("[3]", "expected an id")])
def test_parse_entries_errors(spec, msg):
    with pytest.raises(InputError, match=msg):
        parse_entries(spec)


def test_cli_regenerates_from_json(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CIR_BACKBONE", raising=False)
    q = tmp_path / "q.json"
    q.write_text(json.dumps(["test-00001", {"reference": "test/000005", "text": "Add a red star."}]))
    common = ["--backbone", "cir-tiny-vit", "--world-queries", str(N_QUERIES),
              "--cache-dir", str(cache_root()), "--methods", "sum,pact", "--k", "3"]
    outs = [tmp_path / "fig.pdf", tmp_path / "fig.png", tmp_path / "again.json"]
    assert main(["--queries", str(q), *[a for o in outs for a in ("--out", str(o))], *common]) == 0
    assert outs[0].read_bytes()[:5] == b"%PDF-" and Image.open(outs[1]).width > 300
    spec = json.loads(outs[2].read_text())
    assert spec["queries"][0] == {"query_id": "test-00001"} and spec["methods"] == ["sum", "pact"]
    # the exported JSON is itself a valid --queries file
    assert main(["--queries", str(outs[2]), "--out", str(tmp_path / "b.png"), *common]) == 0
    assert main(["--queries", str(tmp_path / "missing.json"), "--out", str(tmp_path / "c.png"),
                 *common]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_pdf_embeds_truetype_fonts_not_type3(tmp_path):
    """Camera-ready checkers reject Type 3 fonts; matplotlib's default PDF font type is 3."""
    import shutil
    import subprocess

    pdf = save(render([_panel()]), tmp_path / "f.pdf")
    raw = pdf.read_bytes()
    assert b"/Type3" not in raw and b"/CIDFontType2" in raw  # Type 42: TrueType outlines
    if shutil.which("pdffonts"):  # poppler-utils
        table = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout
        rows = table.splitlines()[2:]
        assert rows and not any("Type 3" in r for r in rows) and all("TrueType" in r for r in rows), table


def test_engine_argv_rebuilds_the_settings():
    from cir_core.settings import EngineConfig, engine_argv, engine_config

    assert engine_argv(EngineConfig()) == []
    cfg = EngineConfig(backbone="ViT-B-32", pretrained="laion2b_s34b_b79k", checkpoints="org/ckpt@v1",
                       gallery="/srv/frames", world_queries=30, method_checkpoints={"pact": "/srv/p"})
    again = engine_config(engine_argv(cfg), env={})
    assert [getattr(again, f) for f in ("backbone", "pretrained", "checkpoints", "gallery", "world_queries",
                                        "method_checkpoints")] == \
        ["ViT-B-32", "laion2b_s34b_b79k", "org/ckpt@v1", "/srv/frames", 30, {"pact": "/srv/p"}]


def test_the_regenerate_command_works_from_another_folder(tmp_path):
    """The exported JSON's `regenerate` line, run as a user would from the download folder (not the
    repository: `python -m cir_core.figures` alone fails there with 'No module named cir_core')."""
    import os
    import subprocess

    from _cir_fakes import make_test_engine

    from cir_core.figures import export
    from cir_core.settings import EngineConfig, engine_argv

    engine = make_test_engine()
    spec = export(engine, [{"query_id": "test-00001"}], ["sum"], [tmp_path / "q.json"], k=2,
                  engine_args=engine_argv(EngineConfig(world_queries=N_QUERIES))).spec
    cmd = spec["regenerate"]
    assert "PYTHONPATH=" in cmd and "--world-queries 30" in cmd and "--queries q.json" in cmd
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CIR_BACKBONE", "CIR_GALLERY")}
    env["CIR_CACHE_DIR"] = str(cache_root())
    run = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "fig.pdf").read_bytes()[:5] == b"%PDF-" and Image.open(tmp_path / "fig.png").width > 200


@pytest.mark.parametrize("width, inches", [("column", 3.25), ("text", 6.75)])
def test_a_figure_is_camera_ready_at_a_papers_column_and_text_width(tmp_path, width, inches):
    """Issue 44: score labels were 6.4 pt at the exported size (≈ 5.4 pt at a paper's text width),
    thumbnails 200 ppi, internal ids in the titles, no legend, a blank area under the reference.
    Measured from the PDF: the page is the width asked for, no text is below 7 pt, every image is
    placed at >= 300 ppi, the fonts are TrueType (no Type 3)."""
    from _cir_fakes import fake_trained_methods, make_test_engine
    from _pdf import Pdf

    from cir_core.figures import export

    with fake_trained_methods():
        engine = make_test_engine()
        out = export(engine, [{"query_id": "test-00001"}, {"reference": "test/000005", "text": "Add a red star."}],
                     ["pact", "dice", "pace", "sum"], [tmp_path / "f.pdf", tmp_path / "f.png", tmp_path / "q.json"],
                     k=3, width=width, legend=True, maps=True)
    pdf = Pdf.read(tmp_path / "f.pdf")
    w, h = pdf.page_size()
    assert w == pytest.approx(inches * 72, abs=0.01) and h > 0
    sizes = pdf.text_sizes()
    assert len(sizes) > 40 and min(sizes) >= 7.0 - 1e-6, sorted(sizes)[:5]
    ppi = pdf.image_ppi()
    assert len(ppi) == 2 * (1 + 4 * 3) and min(ppi) >= 299.0, sorted(ppi)[:3]
    fonts = set(pdf.fonts())
    assert fonts and fonts <= {b"Type0", b"CIDFontType2", b"TrueType"}, fonts
    png = Image.open(tmp_path / "f.png")
    assert abs(png.width - inches * 300) <= 1  # the PNG at 300 ppi too
    # method labels and letters, not internal ids; the reference as tall as the rows; the map
    p = out.panels[0]
    assert [label for label, _ in p.rows] == ["PACT", "DiCE", "PACE", "Sum (baseline)"]
    assert p.title.startswith("(a)") and "test-00001" not in p.title and out.panels[1].title.startswith("(b)")
    assert p.map is not None and out.spec["width"] == inches and out.spec["legend"] and out.spec["maps"]
    from cir_core.figures import layout

    g = layout(out.panels, inches, legend=True, maps=True)
    assert g.ref_side == pytest.approx(min(g.rows_h, 0.5 * inches))  # as tall as the rows, or half the width
    assert g.score_fmt  # k = 3 leaves room for the scores


def test_a_narrow_figure_says_what_it_left_out_and_ids_come_back_on_request(tmp_path):
    from _cir_fakes import fake_trained_methods, make_test_engine
    from _pdf import Pdf

    from cir_core.errors import InputError
    from cir_core.figures import export

    with fake_trained_methods():
        engine = make_test_engine()
        out = export(engine, [{"query_id": "test-00001"}], ["pact", "dice", "pace", "compose-only", "sum"], [tmp_path / "f.pdf"],
                     k=8, width="column", ids=True)
        assert any("scores left out" in n for n in out.notes) and out.panels[0].title.startswith("(a) test-00001")
        assert min(Pdf.read(tmp_path / "f.pdf").text_sizes()) >= 7.0 - 1e-6  # still nothing below 7 pt
        with pytest.raises(InputError, match="do not fit"):
            export(engine, [{"query_id": "test-00001"}], ["pact"], [tmp_path / "g.pdf"], k=20, width=1.6)
        with pytest.raises(InputError, match="column"):
            export(engine, [{"query_id": "test-00001"}], ["pact"], [tmp_path / "g.pdf"], width="A4")
