"""cir_core: the composed image retrieval library behind the workbench.

Backbone loading and encoding, the generated world with ground truth, galleries and FAISS
indexes, the method registry, scoring (cosine / Chord), metrics and evaluation.
"""
import os as _os

# Gradio looks up outside hosts unless told not to; nothing here needs analytics.
_os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

__version__ = "0.1.0"
