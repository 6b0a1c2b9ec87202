"""cir_core: the composed image retrieval library behind the workbench.

Backbone loading and encoding, the generated world with ground truth, galleries and FAISS
indexes, the method registry, scoring (cosine / Chord), metrics and evaluation.
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
