"""The embedded default world: generated scenes with exact ground truth.

`spec` (what a scene is), `render` (pixels from a spec, any size), `language` (captions, edits),
`data` (queries, splits, training streams), `benchmark` (the evaluation gallery).
See docs/WORLD.md for the specification.
"""
from .benchmark import WorldBenchmark, WorldItem, build_benchmark
from .data import EDIT_TYPES, WorldQuery, make_queries, query_stream, sample_query
from .language import Edit, apply_edit, caption, edit_text, possible_edits
from .render import render
from .spec import N_IDENTITIES, NAMES, Character, Obj, Scene, sample_scene

__all__ = [
    "WorldBenchmark", "WorldItem", "build_benchmark", "EDIT_TYPES", "WorldQuery", "make_queries",
    "query_stream", "sample_query", "Edit", "apply_edit", "caption", "edit_text",
    "possible_edits", "render", "N_IDENTITIES", "NAMES", "Character", "Obj", "Scene",
    "sample_scene",
]
