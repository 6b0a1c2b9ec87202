"""Test helpers for the engine and the app: a small world gallery embedded once per session, and
lightweight stand-ins for the four trained methods (their checkpoints may not exist yet).

`fake_trained_methods()` swaps the registry entries "pact", "dice", "pace", "compose-only" for
fakes (restored on exit), so the app's columns have results whatever has been trained.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import shutil
import tempfile
from pathlib import Path

import numpy as np

from cir_core.methods.base import Method, normalise

N_QUERIES = 30  # 240 gallery images: embedded in ~1-2 s by the tiny backbone


class _Fake(Method):
    """Stands in for a real column method: same name, label and role, simple composition."""

    a, b = 1.0, 1.0  # q = a·v_r + b·f_T(edit)
    app_role = "column"

    def _compose(self, refs, texts: list[str]) -> np.ndarray:
        return self.a * refs.emb + self.b * self.backbone.encode_texts(texts)


class FakePACT(_Fake):
    name, label, a, b = "pact", "PACT", 1.0, 1.0
    order = 10  # the real one's column order


class FakeDiCE(_Fake):
    name, label, a, b = "dice", "DiCE", 0.6, 1.0
    order = 11


class FakeComposeOnly(_Fake):
    name, label, a, b = "compose-only", "compose-only", 0.3, 1.0
    order = 13


class FakePACE(_Fake):
    """q_0 from the whole text, then q_k = norm(q_{k-1} + ½ f_T(s_k)): a native progression."""

    name, label = "pace", "PACE"
    order = 12
    native_progression = True

    def progression(self, ref, sentences):
        ref = self._check_ref(ref).emb[:1]
        q = normalise(ref + self.backbone.encode_texts([" ".join(sentences)]))[0]
        out = []
        for e in self.backbone.encode_texts(list(sentences)):
            q = normalise(q + 0.5 * e)
            out.append(q)
        return out


class NeedsCheckpoint(_Fake):
    """A trained method whose checkpoint is missing: create_method must refuse it."""

    name, label = "dice", "DiCE"
    order = 11
    needs_checkpoint = True

    @classmethod
    def from_checkpoint(cls, backbone, folder):
        return cls(backbone)


FAKES = {c.name: c for c in (FakePACT, FakeDiCE, FakePACE, FakeComposeOnly)}


@contextlib.contextmanager
def fake_trained_methods(**override):
    """Register the fakes (plus `name=cls` overrides) for the duration of the block."""
    from cir_core.methods import base

    base.list_methods()  # import every real method first, so they cannot re-register over us
    swap = {**FAKES, **override}
    saved = {n: base._REGISTRY.get(n) for n in swap}
    base._REGISTRY.update(swap)
    try:
        yield swap
    finally:
        for n, cls in saved.items():
            if cls is None:
                base._REGISTRY.pop(n, None)
            else:
                base._REGISTRY[n] = cls


@functools.lru_cache(maxsize=None)
def backbone():
    """The shipped tiny backbone when it is built, else the same architecture at random init."""
    from cir_core.backbone import load_backbone
    from cir_core.paths import DEFAULT_BACKBONE, DEFAULT_BACKBONE_DIR

    if (DEFAULT_BACKBONE_DIR / "open_clip_config.json").is_file():
        return load_backbone(DEFAULT_BACKBONE)
    return load_backbone("cir-tiny-vit", pretrained=None, seed=0)


@functools.lru_cache(maxsize=None)
def cache_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="cir-test-cache-"))
    atexit.register(shutil.rmtree, root, True)
    return root


@functools.lru_cache(maxsize=None)
def world(n: int = N_QUERIES):
    """(benchmark, gallery, embeddings) of a small test world, embedded once per session."""
    from cir_core.gallery import EmbeddingCache
    from cir_core.world import build_benchmark

    bb = backbone()
    bench = build_benchmark("test", n)
    gallery = bench.gallery(bb.image_size)
    emb = EmbeddingCache(cache_root()).embed(gallery, bb)
    return bench, gallery, emb


def make_test_engine(checkpoints: Path | None = None, **kw):
    """A fresh Engine on the small world (methods are built lazily, from the registry as it is
    when first asked). `checkpoints`: a folder of <method>/ (default: an empty one)."""
    from cir_core.engine import CheckpointSource, Engine

    bench, gallery, emb = world()
    folder = checkpoints or (cache_root() / "no-checkpoints")
    folder.mkdir(parents=True, exist_ok=True)
    return Engine(backbone(), gallery, emb, bench=bench,
                  checkpoints=CheckpointSource(str(folder), folder), **kw)


def long_query(engine, min_sentences: int = 2):
    """A world query with at least `min_sentences` sentences: (query, reference row)."""
    q = next(q for q in engine.view.bench.queries if len(q.sentences) >= min_sentences)
    return engine.view.query(q.query_id)


def plain(markdown: str) -> str:
    """Markdown source with the backslash escapes of `ui.common.md_text` removed (and &lt; &gt;
    &amp; decoded), i.e. the text a reader sees, for substring checks."""
    import html
    import re

    return html.unescape(re.sub(r"\\(.)", r"\1", markdown))


def unit_rows(n: int, d: int, seed: int = 0):
    """`n` random unit rows of dimension `d` (float32)."""
    import numpy as np

    r = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return r / np.linalg.norm(r, axis=1, keepdims=True)


def fake_methods_engine():
    """A test engine over the fake trained methods, every method already loaded (they stay
    usable after the fakes are unregistered)."""
    with fake_trained_methods():
        e = make_test_engine()
        e.methods.available()
    return e


def fit(task, batch, opt, steps: int = 15) -> dict:
    """`steps` optimizer steps of `task` on one fixed batch; the last step's logs."""
    logs: dict = {}
    for _ in range(steps):
        loss, logs = task.loss(task.model, batch)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return logs
