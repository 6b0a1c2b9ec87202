"""The workbench engine: one backbone, one gallery, the methods, and `compare`: a reference and an
edit in, every method's top-k and a progression out.

    engine = load_engine(EngineConfig(world_queries=30, backbone="cir-tiny-vit"))
    ref = engine.view.reference_from_id("test/000000")     # a gallery item: its cached embedding
    res = engine.compare(ref, "Make the square blue. Move the character to the left.", k=8)
    res.methods[0].hits[0].item_id, res.progression.steps[1].hits, res.timings

The parts, each its own module: `GalleryView` (`gallery_view`: the gallery, its embeddings and
raw norms, characters, captions, thumbnails, world queries and ground truth, references from
rows and uploads), `cir_core.search.Searcher` (how the gallery is searched, decided once),
`MethodSet` (`method_set`: the methods built lazily on the shared `cir_core.memo.TextMemo`, each
failure remembered in its own column, the q_∅ cache), and `pipeline` (one request in stages:
check, encode, compose, search, present). `results` is what `compare` returns; `checkpoints`
where the methods' folders come from; `common` the request limits. No UI code here: the Gradio
tabs in `ui/` and the figure exporter `cir_core/figures.py` both call this.
"""
from __future__ import annotations

from ..checkpoint_source import CheckpointSource, resolve_checkpoints
from .common import MAX_K, MAX_STEPS, MAX_TEXT_CHARS, MAX_UPLOAD_PIXELS, normalise_text
from .core import Engine, load_engine, open_gallery
from .gallery_view import GalleryView
from .method_set import MethodSet
from .pipeline import check_edit
from .request import NO_REFERENCE, Admitted, CompareRequest, admit
from .results import CompareResult, Hit, MethodResult, Progression, Reference, Step

__all__ = ["Engine", "load_engine", "open_gallery", "GalleryView", "MethodSet", "check_edit",
           "CompareRequest", "Admitted", "admit", "NO_REFERENCE",
           "CheckpointSource", "resolve_checkpoints", "Reference", "Hit", "MethodResult", "Step", "Progression",
           "CompareResult", "MAX_TEXT_CHARS", "MAX_UPLOAD_PIXELS", "MAX_K", "MAX_STEPS", "normalise_text"]
