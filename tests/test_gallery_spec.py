"""The one gallery-spec parser (`cir_core.gallery_spec`): every form to its typed spec, one error
that lists the forms, an opener registered for every kind, and no other file of the product
dispatching on a spec's text."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cir_core.errors import GalleryError
from cir_core.gallery_spec import (
    FORMS,
    KINDS,
    GalleryContext,
    GallerySpec,
    open_gallery_spec,
    parse_gallery_spec,
    register_opener,
    spec_kind,
)

ROOT = Path(__file__).resolve().parents[1]


def test_every_form_parses_to_its_kind(tmp_path):
    photos = tmp_path / "photos"
    photos.mkdir()
    (tmp_path / "m.jsonl").write_text("{}\n")
    idx = tmp_path / "idx"
    idx.mkdir()
    (idx / "build.json").write_text("{}")
    want = {"world": ("world", "test"), "world:test": ("world", "test"), "world:val": ("world", "val"),
            "world:films": ("films", "test"), "world:films-val": ("films", "val"),
            "movienet:/data/set": ("movienet", "/data/set"), "hf:org/name": ("hub", "org/name"),
            "hf:org/name@refs/pr/1": ("hub", "org/name@refs/pr/1"), str(photos): ("folder", str(photos)),
            str(tmp_path / "m.jsonl"): ("manifest", str(tmp_path / "m.jsonl")), str(idx): ("index", str(idx)),
            "milvus:frames@./g.db": ("milvus", "./g.db"),
            "milvus:f_2@http://user:pw@host:19530": ("milvus", "http://user:pw@host:19530")}
    for text, (kind, target) in want.items():
        spec = parse_gallery_spec(f"  {text} ")
        assert (spec.kind, spec.target, spec.text) == (kind, target, text), text
    assert {parse_gallery_spec(t).kind for t in want} == set(KINDS)  # every kind reached


def test_milvus_specs_carry_their_collection_and_typed_options():
    spec = parse_gallery_spec("milvus:frames@https://in03.example.com?shortlist=500&nprobe=64&timeout=2.5")
    assert spec == GallerySpec("milvus", "https://in03.example.com", spec.text, "frames",
                               {"shortlist": 500, "nprobe": 64, "timeout": 2.5})
    assert isinstance(spec.options["shortlist"], int)
    assert parse_gallery_spec("milvus:f@./g.db?images=hf:org/frames@v1").options == {"images": "hf:org/frames@v1"}
    for bad, why in [("milvus:frames", "milvus:COLLECTION@URI"), ("milvus:@./g.db", "not a Milvus collection"),
                     ("milvus:2frames@./g.db", "not a Milvus collection"), ("milvus:a-b@./g.db", "not a Milvus"),
                     ("milvus:f@./g.db?limit=3", "unknown Milvus option 'limit'"),
                     ("milvus:f@./g.db?nprobe=lots", "nprobe='lots' is not a number"),
                     ("milvus:f@./g.db?shortlist=0", "shortlist must be > 0"),
                     ("milvus:f@./g.db?images=/data/frames", "come from a Hub gallery")]:
        with pytest.raises(GalleryError, match=why):
            parse_gallery_spec(bad)


def test_a_bad_spec_is_one_error_that_lists_every_form(tmp_path):
    for bad, why in [("", "empty"), ("world:train", "no such world split"), ("movienet:", "movienet:ROOT"),
                     ("hf:justaname", "hf:ORG/NAME"), ("hf:org/name@", "hf:ORG/NAME"),
                     (str(tmp_path / "nope"), "no such folder or file")]:
        with pytest.raises(GalleryError) as err:
            parse_gallery_spec(bad)
        msg = str(err.value)
        assert why in msg and f"gallery {bad!r}" in msg
        assert all(form in msg for form, _ in FORMS.values()), msg  # the whole list, every time
    assert spec_kind(str(tmp_path / "nope")) is None and spec_kind("hf:org/name") == "hub"


def test_every_kind_has_an_opener_once_the_engine_is_imported():
    import cir_core.engine.core as core
    from cir_core import gallery_spec

    core.load_gallery_openers()  # what load_engine and open_gallery run first
    assert gallery_spec.registered_kinds() == KINDS
    with pytest.raises(ValueError, match="already has an opener"):
        register_opener("folder")(lambda spec, ctx: None)
    with pytest.raises(ValueError, match="unknown gallery kind"):
        register_opener("ftp")


def test_open_restricts_kinds_with_a_clear_error(tmp_path):
    from PIL import Image

    (tmp_path / "a").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "a" / "x.png")
    opened = open_gallery_spec(str(tmp_path / "a"), GalleryContext())
    assert opened.gallery.ids == ["x.png"] and opened.embeddings is None and opened.store is None
    with pytest.raises(GalleryError, match=r"a MovieNet identity set.*must be one of: FOLDER, FILE.jsonl"):
        open_gallery_spec("movienet:/data/x", kinds=("folder", "manifest"))


def test_the_build_and_push_refuse_what_they_cannot_embed(tmp_path, capsys):
    from cir_core.index.build import FILE_KINDS, open_source

    with pytest.raises(GalleryError, match="a Hub gallery"):
        open_source("hf:org/name")
    with pytest.raises(GalleryError, match="generated world"):
        open_source("world", FILE_KINDS)


def _dispatch_literals(tree: ast.AST) -> set[str]:
    """String constants a module tests text against: `x.startswith(...)` arguments and the
    constants of `==` / `in` comparisons (alone or in a tuple, list or set)."""
    found: set[str] = set()

    def consts(node: ast.AST) -> list[str]:
        items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return [n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)]

    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and getattr(n.func, "attr", "") in ("startswith", "endswith"):
            found.update(c for a in n.args for c in consts(a))
        elif isinstance(n, ast.Compare):
            found.update(c for part in (n.left, *n.comparators) for c in consts(part))
    return found


def test_no_other_module_dispatches_on_a_gallery_specs_text():
    """Checks of a gallery spec's text live in gallery_spec.py only (issue 43: one file decides):
    no other module of the product compares text with a spec's scheme or a world split."""
    schemes = {"hf:", "movienet:", "milvus:", "world:films", "world:films-val", "world:test", "world:val"}
    bad = []
    for pkg in ("cir_core", "ui", "db", "training", "app.py"):
        for path in ([ROOT / pkg] if pkg.endswith(".py") else sorted((ROOT / pkg).rglob("*.py"))):
            if path.name == "gallery_spec.py":
                continue
            hits = schemes & _dispatch_literals(ast.parse(path.read_text(encoding="utf-8")))
            bad += [f"{path.relative_to(ROOT)}: {h!r}" for h in sorted(hits)]
    assert bad == [], bad


def test_the_dispatch_check_finds_what_it_looks_for():
    tree = ast.parse('if spec.startswith("hf:") or spec in ("world", "world:val") or x == "movienet:": pass')
    assert _dispatch_literals(tree) >= {"hf:", "world", "world:val", "movienet:"}
