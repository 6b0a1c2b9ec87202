"""Held-out validation of a world backbone: text→image retrieval plus zero-shot attribute probes.

What the backbone trainer validates with (`training.train_backbone`, recorded in the exported
config) and what `python -m studies.probe_backbone` reruns on any backbone folder. The scenes are
the trainer's own held-out set (`Random("backbone-val")`, novel combinations allowed, never
trained on). A probe asks the image to pick its true caption among the same caption with one
attribute changed to every other value (identical phrasing, the same caption RNG seed).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from cir_core.metrics import recall_from_ranks
from cir_core.text_tower import encode_tokens
from cir_core.world import apply_edit, caption, possible_edits, render, sample_scene
from cir_core.world.spec import N_IDENTITIES, Character, Scene

MEAN = torch.tensor((0.48145466, 0.4578275, 0.40821073)).view(3, 1, 1)
STD = torch.tensor((0.26862954, 0.26130258, 0.27577711)).view(3, 1, 1)
PROBE_OPS = ("background", "char_move", "char_face", "colour", "size", "shape", "move")
PROBES = PROBE_OPS + ("identity",)


def to_tensor(images: list) -> torch.Tensor:
    """Same arithmetic as open_clip's eval transform on an image already at model size."""
    arr = torch.from_numpy(np.stack([np.asarray(im, dtype=np.uint8) for im in images]))
    return (arr.permute(0, 3, 1, 2).float() / 255.0 - MEAN) / STD


@dataclass(frozen=True)
class HeldOut:
    """The held-out scenes, their render seeds and one caption each."""
    scenes: list[Scene]
    seeds: list[int]
    captions: list[str]


def heldout_set(n: int) -> HeldOut:
    """`n` held-out validation scenes. The scenes are a prefix of one stream; their seeds and
    captions are drawn after all `n` scenes (the trainer's order), so they depend on `n`."""
    rng = random.Random("backbone-val")
    scenes = [sample_scene(rng) for _ in range(n)]
    seeds = [rng.randrange(1 << 30) for _ in scenes]
    return HeldOut(scenes, seeds, [caption(s, rng) for s in scenes])


def probe_alternatives(s: Scene) -> dict[str, list[Scene]]:
    """Per probe, the scene with that one attribute changed to every other value (object
    attributes: the first object's only)."""
    first = s.objects[0].shape
    groups = {op: [apply_edit(s, e) for e in possible_edits(s, (op,)) if e.target in (None, first)]
              for op in PROBE_OPS}
    c = s.character
    groups["identity"] = [Scene(s.background, Character(k, c.position, c.facing), s.objects)
                          for k in range(N_IDENTITIES) if k != c.identity]
    return groups


class Encoder:
    """L2-normalised features from an open_clip CLIP model, in batches, without gradients."""

    def __init__(self, model: torch.nn.Module, tokenizer, image_size: int) -> None:
        self.model, self.tokenizer, self.size = model, tokenizer, image_size

    @torch.no_grad()
    def images(self, images: list) -> torch.Tensor:
        dev = next(self.model.parameters()).device
        feats = [self.model.encode_image(to_tensor(images[i:i + 256]).to(dev))
                 for i in range(0, len(images), 256)]
        return F.normalize(torch.cat(feats).float(), dim=-1).cpu()

    @torch.no_grad()
    def texts(self, texts: list[str]) -> torch.Tensor:
        dev = next(self.model.parameters()).device
        feats = [encode_tokens(self.model, self.tokenizer(texts[i:i + 512]).to(dev))
                 for i in range(0, len(texts), 512)]
        return F.normalize(torch.cat(feats).float(), dim=-1).cpu()


def probe(enc: Encoder, held: HeldOut, img: torch.Tensor, n: int) -> dict[str, float]:
    """Zero-shot accuracy per attribute on the first `n` held-out scenes (`img`: their image
    features, in order)."""
    caps: list[str] = []
    spans: list[tuple[str, int, int, int]] = []  # (probe, scene index, start, end) into caps
    for i, s in enumerate(held.scenes[:n]):
        for op, alts in probe_alternatives(s).items():
            if alts:
                start = len(caps)
                caps += [caption(x, random.Random(f"probe:{i}")) for x in [s] + alts]
                spans.append((op, i, start, len(caps)))
    txt = enc.texts(caps)
    hits: dict[str, list[float]] = {op: [] for op in PROBES}
    for op, i, a, b in spans:
        hits[op].append(float((txt[a:b] @ img[i]).argmax().item() == 0))
    return {f"probe_{k}": float(np.mean(v)) for k, v in hits.items() if v}


def evaluate(model: torch.nn.Module, tokenizer, image_size: int, val_scenes: int = 1000,
             probe_scenes: int = 200, held: HeldOut | None = None) -> dict[str, float]:
    """Text→image and image→text recall over `val_scenes` held-out scenes, and the probes on
    the first `probe_scenes` of them; values rounded to 4 digits."""
    held = held or heldout_set(max(val_scenes, probe_scenes))
    enc = Encoder(model, tokenizer, image_size)
    img = enc.images([render(s, image_size, sd) for s, sd in zip(held.scenes, held.seeds)])
    txt = enc.texts(held.captions)
    sims = txt[:val_scenes] @ img[:val_scenes].T
    ranks = (sims > sims.diag()[:, None]).sum(1).numpy()  # how many images beat the caption's own
    i2t = (sims.T > sims.diag()[:, None]).sum(1).numpy()
    out = {**{f"t2i_{k}": v for k, v in recall_from_ranks(ranks, (1, 5)).items()},
           "i2t_R@1": recall_from_ranks(i2t, (1,))["R@1"]}
    out.update(probe(enc, held, img, probe_scenes))
    return {k: round(v, 4) for k, v in out.items()}

