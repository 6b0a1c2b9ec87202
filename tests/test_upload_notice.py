"""The Compare status line: an uploaded photo on the shipped world backbone says plainly that the
model knows only the generated world and how to start the app with a real backbone."""
from types import SimpleNamespace

from ui.results import status_line


def _res(kind: str, query_id=None, character=None, row=None):
    ref = SimpleNamespace(kind=kind, label="upload: photo.jpg" if kind == "upload" else "test/000001",
                          character=character, row=row)
    return SimpleNamespace(reference=ref, sentences=["Make it red."], k=8, scoring="cosine",
                           query_id=query_id, methods=[], notes=[])


def test_upload_on_the_world_backbone_says_so():
    for ident in ("cir-tiny-vit@local:4cbf08aff66c1a23", "cir-tiny-vit@random-seed0",
                  "cir-tiny-rn@local:6256a2bff0568159"):
        line = status_line(_res("upload"), ident)
        assert "Uploaded reference" in line and "knows only the generated world" in line
        assert "--backbone ViT-B-32 --pretrained laion2b_s34b_b79k" in line and "CIR_BACKBONE" in line


def test_no_notice_for_a_real_backbone_or_a_gallery_reference():
    assert "generated world" not in status_line(_res("upload"), "ViT-B-32@laion2b_s34b_b79k")
    assert "generated world" not in status_line(_res("upload"))
    line = status_line(_res("gallery", character="Ada", row=3), "cir-tiny-vit@local:x")
    assert "generated world" not in line and "Free-text edit" in line
