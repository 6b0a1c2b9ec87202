"""RTD (Byun et al., ICCV 2025, arXiv 2406.09188; NAVER): a post-hoc fine-tune of the *text encoder*
of a projection-based zero-shot CIR method, registered once per peer: `rtd-lincir`, `rtd-searle`,
`rtd-pic2word` (optional columns).

The peer's φ is kept as trained (frozen); a copy of the backbone's text tower is tuned by
frozen-target text contrastive learning (training/train_rtd.py) and reads the peer's own prompt
with φ(v_r) at its placeholder. The image tower, and so the gallery, is untouched. What the
authors' code fixes (their `train_text_encoder.py`, `loader.py: CaptionDataset_RTD`,
`validate.py`; docs/METHODS.md, RTD):

- their checkpoint is `torch.save({'epoch': ..., 'CLIPTextModelWithProjection': state_dict})`
  (`save_text_encoder`: the key is the module's class name) and `validate.py` loads it whole into
  the Hugging Face `CLIPTextModelWithProjection` beside the unchanged φ checkpoint;
- the tuned tower reads `"a photo of $ that {edit}"` (LinCIR's `encode_with_pseudo_tokens_HF`, every
  `$`), the query is its projected feature; the gallery is scored by cosine as the base method.

A checkpoint here is φ (`phi.*`, the peer's key names) and the tuned tower (`text.*`, open_clip's key
names). The token-embedding table (49408 × width: 25 MB on the tiny backbone, 150 MB on ViT-L/14)
is stored only when it was tuned (`tune_token_embedding`, true for a converted release); otherwise
the tower reads the backbone's own, frozen. `convert_release` maps the authors' Hugging Face keys
onto open_clip's (q, k, v concatenated into `in_proj`; `text_projection.weight` transposed).
"""
from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from cir_core.checkpoint import check_fit, read_state_file, shapes_of, state_dict_in
from cir_core.errors import BackboneError, CheckpointError, InputError
from cir_core.text_tower import supports_token_embeddings

from ..encoder import Towers
from .base import register_method
from .lincir import LinCIR
from .pic2word import Pic2Word, Pic2WordConfig
from .pseudoword import PseudoWord
from .searle import SEARLE
from .textinv import PhiConfig, TextInversionMethod

HF_KEY = "CLIPTextModelWithProjection"  # save_text_encoder: model_to_save.__class__.__name__
HF_SOURCE = "RTD train_text_encoder.py (save_text_encoder), validate.py (--text-encoder-checkpoint-name)"
_COPIED = ("positional_embedding", "transformer", "ln_final", "text_projection")


class TunedTower(nn.Module):
    """A copy of an open_clip CLIP's text parts, laid out like `CLIP` so `encode_tokens` runs on it.
    With `own_embedding` False the token embedding stays the backbone's (shared, frozen, not in the
    state dict): RTD's recipe here tunes the transformer, the final norm, the positions and the
    projection."""

    transformer: Any  # copied below by name: open_clip's text Transformer (untyped; `.resblocks`)

    def __init__(self, model: nn.Module, own_embedding: bool):
        super().__init__()
        if not supports_token_embeddings(model):
            raise BackboneError(f"RTD needs an open_clip CLIP text tower; {type(model).__name__} has none")
        mask = model.attn_mask
        if not isinstance(mask, torch.Tensor):
            raise BackboneError(f"RTD needs a causal text tower; {type(model).__name__} has no attention mask")
        for name in _COPIED:
            setattr(self, name, copy.deepcopy(getattr(model, name)))
        self.register_buffer("attn_mask", mask.detach().clone(), persistent=False)
        if own_embedding:
            self.own_embedding = copy.deepcopy(model.token_embedding)
        else:
            self.__dict__["_shared_embedding"] = model.token_embedding  # not a submodule: not saved
        self.text_pool_type = getattr(model, "text_pool_type", "argmax")
        self.text_eos_id = getattr(model, "text_eos_id", None)

    @property
    def token_embedding(self) -> nn.Module:
        own = self._modules.get("own_embedding")
        return own if own is not None else self.__dict__["_shared_embedding"]


class RTDWeights(nn.Module):
    """What an RTD checkpoint holds: the peer's φ (`phi`, frozen) and the tuned tower (`text`)."""

    def __init__(self, phi: nn.Module, text: TunedTower):
        super().__init__()
        self.phi, self.text = phi, text


@dataclass
class RTDPhiConfig(PhiConfig):
    """The peer's φ (SEARLE's / LinCIR's `Phi`) and whether the token embedding was tuned too."""

    tune_token_embedding: bool = False


@dataclass
class RTDPic2WordConfig(Pic2WordConfig):
    """Pic2Word's IM2TEXT and whether the token embedding was tuned too."""

    tune_token_embedding: bool = False


if TYPE_CHECKING:
    _Peer = TextInversionMethod  # what RTDMethod is mixed in before: its attributes, for the type checker
else:
    _Peer = object


class RTDMethod(_Peer):
    """Mixed in before a peer class: the same φ and prompt, read by the tuned tower."""

    base: ClassVar[str]
    weights_label = "φ and tuned text tower"
    source_key = HF_KEY
    source_file = HF_SOURCE

    def __init__(self, backbone: Towers, config: dict | None = None, mapper: nn.Module | None = None):
        super().__init__(backbone, config, mapper)
        self.tower = TunedTower(backbone.model, bool(self.arch.tune_token_embedding))
        self.tower.to(next(backbone.model.parameters()).device).eval().requires_grad_(False)
        self.text = PseudoWord(backbone.tokenizer, self.tower, self.placeholder, self.replace)
        self.bundle = RTDWeights(self.mapper, self.tower)

    def weights(self) -> nn.Module:
        return self.bundle

    def checkpoint_extra(self) -> dict[str, Any]:
        return {**super().checkpoint_extra(), "base": self.base}

    # -- the authors' released text encoder -----------------------------------------------------
    @classmethod
    def convert_release(cls, source: Path, out: Path, backbone: Towers, allow_pickle: bool = False,
                        chord_lambda: float | None = None, input_scale: float | None = None,
                        base: str | Path | None = None) -> Path:
        """Write `out` from the authors' text encoder `source` and the peer's φ `base` (a checkpoint
        folder of this project, or the peer's release file, converted as `convert` does)."""
        from .convert import PICKLE_HINT, base_from_release

        if not base:
            raise InputError(f"{cls.name} needs the φ it was tuned with: --base (a {cls.base} checkpoint "
                             "folder or the authors' φ file)")
        peer = base_from_release(cls.base, Path(base), backbone, allow_pickle, input_scale)
        assert cls.config_cls is not None, "an RTD method declares its architecture"
        arch = cls.config_cls(**{**peer.arch.to_dict(), "tune_token_embedding": True})
        m = cls(backbone, {"arch": arch.to_dict(), **({} if chord_lambda is None else {"chord_lambda": chord_lambda})},
                mapper=peer.mapper)
        obj = read_state_file(Path(source), allow_pickle, PICKLE_HINT)
        hf = state_dict_in(obj, HF_KEY, str(source), f" for {cls.name} (layout: {HF_SOURCE})")
        state = hf_to_open_clip(hf, str(source))
        expected = shapes_of(m.tower.state_dict())
        check_fit(shapes_of(state), expected, str(source),
                  f"{cls.name}'s text tower (backbone {backbone.id}: {len(m.tower.transformer.resblocks)} "
                  f"layers, width {m.text.width})")
        m.tower.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
        base_info = peer.checkpoint.extra.get("converted_from") if peer.checkpoint else None
        return m.save(out, metrics={}, converted_from={
            "file": Path(source).name, "sha256": hashlib.sha256(Path(source).read_bytes()).hexdigest(),
            "layout": HF_SOURCE, "base": str(base), "base_converted_from": base_info})


def hf_to_open_clip(hf: dict[str, torch.Tensor], where: str) -> dict[str, torch.Tensor]:
    """A Hugging Face `CLIPTextModelWithProjection` state dict under open_clip's CLIP key names
    (the tower's own: `own_embedding` for the token table). CheckpointError naming `where` and the
    key for a tensor that has no counterpart."""
    out: dict[str, torch.Tensor] = {}
    qkv: dict[str, dict[str, torch.Tensor]] = {}
    fixed = {"text_model.embeddings.token_embedding.weight": "own_embedding.weight",
             "text_model.embeddings.position_embedding.weight": "positional_embedding",
             "text_model.final_layer_norm.weight": "ln_final.weight",
             "text_model.final_layer_norm.bias": "ln_final.bias"}
    block = {"self_attn.out_proj": "attn.out_proj", "layer_norm1": "ln_1", "layer_norm2": "ln_2",
             "mlp.fc1": "mlp.c_fc", "mlp.fc2": "mlp.c_proj"}
    for key, value in hf.items():
        if key in fixed:
            out[fixed[key]] = value
        elif key == "text_projection.weight":
            out["text_projection"] = value.T.contiguous()  # nn.Linear(W, D, bias=False) vs x @ P
        elif key == "text_model.embeddings.position_ids":
            continue  # a buffer of 0..L-1 (persistent in older transformers)
        elif key.startswith("text_model.encoder.layers."):
            layer, rest = key.removeprefix("text_model.encoder.layers.").split(".", 1)
            part, kind = rest.rsplit(".", 1)
            if part in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"):
                qkv.setdefault(f"{layer}.{kind}", {})[part[10]] = value
            elif part in block:
                out[f"transformer.resblocks.{layer}.{block[part]}.{kind}"] = value
            else:
                raise CheckpointError(f"{where}: key {key} has no open_clip counterpart")
        else:
            raise CheckpointError(f"{where}: key {key} has no open_clip counterpart")
    for lk, parts in qkv.items():
        layer, kind = lk.split(".")
        if set(parts) != {"q", "k", "v"}:
            raise CheckpointError(f"{where}: layer {layer} has {kind}s of only {sorted(parts)} of q, k, v")
        name = "in_proj_weight" if kind == "weight" else "in_proj_bias"
        out[f"transformer.resblocks.{layer}.attn.{name}"] = torch.cat([parts["q"], parts["k"], parts["v"]])
    return out


@register_method
class RTDLinCIR(RTDMethod, LinCIR):
    name = "rtd-lincir"
    label = "RTD (LinCIR)"
    order = 23
    base = "lincir"
    config_cls = RTDPhiConfig
    description = "LinCIR's φ(v_r) in 'a photo of $ that {edit}', read by the RTD-tuned text tower"


@register_method
class RTDPic2Word(RTDMethod, Pic2Word):
    name = "rtd-pic2word"
    label = "RTD (Pic2Word)"
    order = 24
    base = "pic2word"
    config_cls = RTDPic2WordConfig
    description = "Pic2Word's IM2TEXT(v_r) in 'a photo of * , {edit}', read by the RTD-tuned text tower"


@register_method
class RTDSEARLE(RTDMethod, SEARLE):
    name = "rtd-searle"
    label = "RTD (SEARLE)"
    order = 25
    base = "searle"
    config_cls = RTDPhiConfig
    description = "SEARLE's φ(v_r) in 'a photo of $ that {edit}', read by the RTD-tuned text tower"
