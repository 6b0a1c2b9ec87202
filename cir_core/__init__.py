"""cir_core: the composed image retrieval library behind the workbench.

Backbone loading and encoding, the generated world with ground truth, galleries and FAISS
indexes, the method registry, scoring (cosine / Chord), metrics and evaluation. The curated API
(docs/API.md) is this package's top level; it is loaded on first use, so `import cir_core` stays
cheap (no torch) and the settings below are in place before torch, faiss or numpy load:

    import cir_core
    engine = cir_core.load_engine()
    result = engine.compare(engine.reference("test/000000"), "Make the square blue.", k=5)
"""
import os as _os

# Gradio looks up outside hosts unless told not to; nothing here needs analytics.
_os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
# OpenMP threads that spin while waiting collapse throughput when another process shares the
# cores (measured: FAISS search 26x slower, tiny-backbone training ~1.7x slower on 2 cores).
# libgomp reads this once when torch/faiss load, so it is set here, before either is imported.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# numpy's OpenBLAS threads spin ~2^28 cycles after each call, on the cores torch's pool needs
# next (measured: the int8 filter's kernel 4.5 ms right after a numpy product, 2.9 ms with this).
# 2^4 cycles: they sleep at once. Read when numpy loads, so it must be set before that too.
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

__version__ = "0.1.0"

# name -> (module, attribute): the front door, imported when first asked for (PEP 562).
_API = {
    "load_engine": ("cir_core.api", "load_engine"),
    "open_gallery": ("cir_core.api", "open_gallery"),
    "evaluate": ("cir_core.api", "evaluate"),
    "EngineConfig": ("cir_core.settings", "EngineConfig"),
    "Engine": ("cir_core.engine", "Engine"),
    "CompareResult": ("cir_core.engine.results", "CompareResult"),
    "Reference": ("cir_core.engine.results", "Reference"),
    "Gallery": ("cir_core.gallery", "Gallery"),
    "load_backbone": ("cir_core.backbone", "load_backbone"),
    "Encoder": ("cir_core.encoder", "Encoder"),
    "list_methods": ("cir_core.methods", "list_methods"),
    "create_method": ("cir_core.methods", "create_method"),
    "method_label": ("cir_core.methods", "method_label"),
    "register_method": ("cir_core.methods", "register_method"),
    "Method": ("cir_core.methods", "Method"),
    "list_benchmarks": ("cir_core.benchmarks", "list_benchmarks"),
    "load_benchmark": ("cir_core.benchmarks", "load_benchmark"),
    "ScoreOpts": ("cir_core.search.scoring", "ScoreOpts"),
    "CIRError": ("cir_core.errors", "CIRError"),
}
__all__ = ["__version__", *_API]


def __getattr__(name: str):  # noqa: ANN202 (PEP 562)
    if name not in _API:
        raise AttributeError(f"module 'cir_core' has no attribute {name!r}")
    import importlib

    module, attr = _API[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
