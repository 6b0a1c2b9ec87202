"""Gallery indexes: the FAISS `Index` (exact, HNSW, IVF-Flat), the resumable `build` of an index
folder from a gallery (`python -m cir_core.index build`), and `prebuilt` (opening such a folder)."""
from .core import ANN_KINDS, KINDS, Index, ivf_lists

__all__ = ["Index", "KINDS", "ANN_KINDS", "ivf_lists"]
