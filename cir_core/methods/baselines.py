"""The zero-training baselines every CIR paper reports: text-only, image-only and their sum."""
from __future__ import annotations

import numpy as np

from .base import Method, normalise, register_method
from .refs import Refs


@register_method
class TextOnly(Method):
    name = "text-only"
    label = "Text only"
    order = 0
    description = "f_T(edit): ignores the reference image"

    def _compose(self, refs: Refs, texts: list[str]) -> np.ndarray:
        return self.backbone.encode_texts(texts)


@register_method
class ImageOnly(Method):
    name = "image-only"
    label = "Image only"
    order = 1
    reads_whole_text = False  # reads no text at all
    description = "v_r: ignores the edit (q − q_∅ = 0, so Chord adds nothing)"

    def _compose(self, refs: Refs, texts: list[str]) -> np.ndarray:
        return refs.emb.copy()


@register_method
class Sum(Method):
    name = "sum"
    label = "Sum (baseline)"
    order = 2
    app_role = "baseline"
    description = "norm(v_r + f_T(edit))"

    def _compose(self, refs: Refs, texts: list[str]) -> np.ndarray:
        return normalise(refs.emb) + self.backbone.encode_texts(texts)
