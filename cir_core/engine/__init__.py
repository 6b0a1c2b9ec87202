"""The workbench engine: one backbone, one gallery (cached embeddings + FAISS index), the methods,
and `compare`: a reference and an edit in, every method's top-k and a progression out.

    engine = load_engine(EngineConfig(world_queries=30, backbone="cir-tiny-vit"))
    ref = engine.reference_from_id("test/000000")          # a gallery item: its cached embedding
    res = engine.compare(ref, "Make the square blue. Move the character to the left.", k=8)
    res.methods[0].hits[0].item_id, res.progression.steps[1].hits, res.timings

The reference is encoded once per request (an upload; a gallery item is never encoded: its row of
the cached gallery embeddings is used) and shared by every method. The texts are encoded once per
request too: `TextMemo` wraps the backbone the methods see, so the methods that read the frozen
text tower (the baselines, DiCE, PACE) share one batched encode of the edit, its sentences and the
empty edit. A method that cannot be built (no checkpoint, not registered in this build, a broken
file) gets its error in its own result; the others still run. No UI code here: the Gradio tabs in
`ui/` and the figure exporter `cir_core/figures.py` both call this.

The parts: `core` (`Engine`, `load_engine`, `open_gallery`), `browse` (its gallery, world-query and
reference methods), `compare` (`Engine.compare`), `ranking` (the search stage), `results` (what
`compare` returns), `textmemo`, `checkpoints`, `common` (limits and method labels).
"""
from __future__ import annotations

from .checkpoints import CheckpointSource, resolve_checkpoints
from .common import MAX_K, MAX_STEPS, MAX_TEXT_CHARS, MAX_UPLOAD_PIXELS, normalise_text
from .core import Engine, load_engine, open_gallery
from .results import CompareResult, Hit, MethodResult, Progression, Reference, Step
from .textmemo import TextMemo

__all__ = ["Engine", "load_engine", "open_gallery", "CheckpointSource", "resolve_checkpoints", "TextMemo",
           "Reference", "Hit", "MethodResult", "Step", "Progression", "CompareResult", "MAX_TEXT_CHARS",
           "MAX_UPLOAD_PIXELS", "MAX_K", "MAX_STEPS", "normalise_text"]
