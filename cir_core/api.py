"""The front door: what a notebook or a script calls (re-exported at `cir_core`'s top level, as
open_clip's is). docs/API.md shows it in ten lines that run on the shipped world.

    import cir_core
    engine = cir_core.load_engine()                       # the shipped world, its trained methods
    result = engine.compare(engine.reference("test/000000"), "Make the square blue.", k=5)
    report = cir_core.evaluate("world", methods=["pact", "sum"])
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from .settings import EngineConfig

if TYPE_CHECKING:
    from .encoder import Encoder
    from .engine import Engine
    from .gallery import Gallery


def load_engine(gallery: str = "world", backbone: str | None = None, pretrained: str | None = None,
                checkpoints: str | None = None, methods: Sequence[str] | None = None, device: str = "cpu",
                **settings: Any) -> Engine:
    """An engine (backbone, gallery and its embeddings, the methods) from the same settings as
    the app's flags (`EngineConfig`; every keyword there is accepted). Defaults: the shipped
    world, its tiny backbone and the trained checkpoints in assets/methods; no batching (one
    caller). Unknown settings are an error naming them."""
    from .engine import load_engine as build

    fields = set(EngineConfig.__dataclass_fields__)
    unknown = sorted(set(settings) - fields)
    if unknown:
        raise TypeError(f"unknown engine settings {unknown}; known: {sorted(fields)}")
    settings.setdefault("batching", False)
    cfg = EngineConfig(gallery=gallery, backbone=backbone, pretrained=pretrained, checkpoints=checkpoints,
                       methods=tuple(methods) if methods else None, device=device, **settings)
    return build(cfg, progress_cb=None)


def open_gallery(spec: str, image_size: int = 64, world_queries: int = 1000,
                 cache_dir: str | Path | None = None) -> Gallery:
    """A gallery by its spec ('world', 'world:films', an image folder, a manifest, ...) without a
    backbone: its items, images and captions (`Gallery`)."""
    from .engine.core import open_gallery as opener

    return opener(spec, world_queries, image_size, Path(cache_dir) if cache_dir else None)[0]


def evaluate(benchmark: str = "world", methods: Sequence[str] | None = None, root: str | Path | None = None,
             split: str | None = None, scorings: Sequence[str] = ("cosine", "chord"),
             backbone: str | Encoder | None = None, pretrained: str | None = None,
             checkpoints: dict[str, str] | None = None, cache_dir: str | Path | None = None,
             progress: bool = False, **options: Any) -> dict[str, Any]:
    """Every method x scoring on a registered benchmark (`python -m cir_core.eval`'s loop): the
    JSON report (`results[method][scoring][metric]`). `root` holds an official benchmark's files;
    `options` are the benchmark's own (`protocol=`, `subset=`, the world's `n_queries=` ...).
    `backbone`: an open_clip spec or an encoder already loaded; default the shipped one."""
    from .backbone import load_backbone
    from .benchmarks import is_generated, load_benchmark
    from .eval.loop import evaluate as run
    from .methods import list_methods
    from .paths import DEFAULT_BACKBONE

    enc = backbone if backbone is not None and not isinstance(backbone, str) else \
        load_backbone(backbone or DEFAULT_BACKBONE, pretrained)
    if is_generated(benchmark):
        options.setdefault("image_size", enc.image_size)
    bench = load_benchmark(benchmark, root, split, **options)
    report, _ = run(bench, enc, list(methods) if methods else list_methods(), list(scorings),
                    cache=Path(cache_dir) if cache_dir else None, progress=progress, checkpoints=checkpoints)
    return report
