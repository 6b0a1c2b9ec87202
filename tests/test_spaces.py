"""Space readiness: the README's Space front-matter, and `@spaces.GPU` applied only when the
`spaces` package is importable (a fake module stands in for it; the real one is not installed)."""
from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from cir_core.spaces_compat import MARK, gpu

ROOT = Path(__file__).resolve().parent.parent


def front_matter(text: str) -> dict:
    import yaml

    assert text.startswith("---\n"), "the Space config must be the very first thing in README.md"
    block, sep, _ = text[4:].partition("\n---\n")
    assert sep, "front-matter is not closed by a '---' line"
    return yaml.safe_load(block)


def test_readme_front_matter_is_a_valid_space_config():
    import gradio

    cfg = front_matter((ROOT / "README.md").read_text(encoding="utf-8"))
    assert cfg["sdk"] == "gradio" and cfg["app_file"] == "app.py"
    assert cfg["sdk_version"] == gradio.__version__  # the Space installs what the tests ran on
    assert (ROOT / cfg["app_file"]).is_file()
    assert str(cfg["python_version"]) == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert cfg["hf_oauth"] is True and cfg["title"] and cfg["emoji"] and cfg["license"]
    (entry,) = cfg["preload_from_hub"]
    # A real public open_clip repo (a placeholder id would fail the Space build), whole repo.
    assert entry.split() == ["laion/CLIP-ViT-B-32-laion2B-s34B-b79K"]


def test_front_matter_parser_rejects_a_late_block():
    with pytest.raises(AssertionError, match="very first"):
        front_matter("# Title\n---\nsdk: gradio\n---\n")


def _fake_spaces(calls: list):
    mod = types.ModuleType("spaces")

    def GPU(fn=None, duration=None):
        calls.append((getattr(fn, "__name__", None), duration))

        def wrapped(*a, **kw):
            calls.append("called")
            return fn(*a, **kw)
        return wrapped

    mod.GPU = GPU
    return mod


def test_gpu_is_the_identity_without_spaces(monkeypatch):
    monkeypatch.setitem(sys.modules, "spaces", None)  # import spaces -> ImportError

    def f(x):
        return x + 1

    assert gpu(f) is f and getattr(f, MARK) is False
    assert gpu(duration=30)(f) is f


def test_gpu_wraps_with_spaces_when_importable(monkeypatch):
    calls: list = []
    monkeypatch.setitem(sys.modules, "spaces", _fake_spaces(calls))

    def f(x):
        return x * 2

    g = gpu(f)
    assert g is not f and getattr(g, MARK) is True and g(4) == 8
    assert calls == [("f", None), "called"]
    gpu(duration=90)(f)
    assert calls[-1] == ("f", 90)


def test_backbone_encoders_carry_the_decorator():
    from cir_core.backbone import Backbone

    assert hasattr(Backbone.encode_images, MARK) and hasattr(Backbone.encode_texts, MARK)
    assert not hasattr(Backbone.tokenize, MARK)  # only the encode entry points


def test_backbone_uses_spaces_gpu_when_the_package_exists(monkeypatch):
    """backbone.py executed afresh (as a throwaway module) while a `spaces` module is importable:
    the import-time branch a Space takes."""
    import importlib.util

    import cir_core.backbone

    calls: list = []
    monkeypatch.setitem(sys.modules, "spaces", _fake_spaces(calls))
    spec = importlib.util.spec_from_file_location("_backbone_on_a_space", cir_core.backbone.__file__)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    assert sorted(c[0] for c in calls) == ["encode_image_batch", "encode_images", "encode_texts"]
    assert getattr(probe.Backbone.encode_images, MARK) is True
    assert getattr(cir_core.backbone.Backbone.encode_images, MARK) is False  # this install: no spaces
