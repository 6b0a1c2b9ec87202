"""Train the tiny open_clip backbone (`cir-tiny-vit`) on the generated world, CLIP-style.

    python -m training.train_backbone [--config FILE] [key=value ...]

Part of every batch is groups: a scene and `group_size - 1` variants of it, each after one
atomic edit of a different kind (`pair_fraction` of the batch; pairs when `group_size` is 2).
Their captions differ in one attribute, so the contrastive loss cannot ignore fine attributes
(positions, facing, identity: the hard ones). From `balanced_pairs_from` on, the kind of change
is drawn first (identity swaps included, weighted by `op_weights`), so rare kinds get their
share; before, an edit is drawn uniformly ("add" is ~80 % of all edits). `text_negatives` adds,
per image, that many captions of its scene after one edit, with the same phrasing (NegCLIP-style
hard negatives for the image→text side). A text that also describes another image of the batch
(same scene, or the same words) is not used as a negative for it. Validation is
`training.probe_backbone.evaluate`: text→image retrieval over held-out scenes plus a zero-shot
probe per attribute.
"""
from __future__ import annotations

import json
import os
import random
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from cir_core.backbone import TINY_MODEL, register_project_configs, save_backbone_dir
from cir_core.text_tower import encode_tokens
from cir_core.world import apply_edit, caption, possible_edits, render, sample_scene
from cir_core.world.spec import N_IDENTITIES, Scene

from .loop import LoopConfig, parse_cli, run
from .probe_backbone import evaluate, heldout_set, to_tensor

DEFAULTS = LoopConfig(steps=4000, lr=1e-3, weight_decay=0.1, warmup=200, eval_every=1000,
                      ckpt_every=250, out_dir="runs/backbone",
                      extra={"batch_size": 128, "pair_fraction": 0.5, "group_size": 2,
                             "balanced_pairs_from": 0, "op_weights": {}, "text_negatives": 0,
                             "val_scenes": 1000, "probe_scenes": 200})
__all__ = ["BackboneTask", "main", "to_tensor", "train_caption"]


def train_caption(scene: Scene, rng: random.Random) -> str:
    """80 % full captions with the name, 10 % "a character", 10 % partial."""
    r = rng.random()
    if r < 0.8:
        return caption(scene, rng)
    if r < 0.9:
        return caption(scene, rng, name=False)
    return caption(scene, rng, background=rng.random() < 0.5, character=rng.random() < 0.5)


def edit_kinds(s: Scene) -> dict[str, list]:
    """The training-split edits of `s` by kind (op), plus "identity": every other identity."""
    kinds: dict[str, list] = {}
    for e in possible_edits(s):
        if not apply_edit(s, e).is_novel():
            kinds.setdefault(e.op, []).append(e)
    kinds["identity"] = [k for k in range(N_IDENTITIES) if k != s.character.identity and not
                         replace(s, character=replace(s.character, identity=k)).is_novel()]
    return kinds


def apply_kind(s: Scene, kinds: dict[str, list], kind: str, rng: random.Random) -> Scene:
    """`s` after a random edit of that kind."""
    choice = rng.choice(kinds[kind])
    if kind == "identity":
        return replace(s, character=replace(s.character, identity=choice))
    return apply_edit(s, choice)


class BackboneTask:
    def __init__(self, cfg: LoopConfig):
        import open_clip

        register_project_configs()
        self.cfg, self.x = cfg, cfg.extra
        self.model = open_clip.create_model(TINY_MODEL, pretrained=None)
        self.size = int(self.model.visual.image_size[0])
        self.tokenizer = open_clip.get_tokenizer(TINY_MODEL)
        self.held = heldout_set(max(int(self.x["val_scenes"]), int(self.x["probe_scenes"])))
        self.clock: dict = {}

    def param_groups(self, cfg: LoopConfig) -> list[dict]:
        decay, no_decay = [], []
        for n, p in self.model.named_parameters():
            (no_decay if p.ndim < 2 or "logit_scale" in n or "embedding" in n else decay).append(p)
        return [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]

    def _kinds(self, kinds: dict[str, list], n: int, rng: random.Random) -> list[str]:
        """`n` distinct edit kinds (fewer if the scene has fewer), weighted by `op_weights`."""
        w = self.x.get("op_weights") or {}
        left = sorted(k for k, v in kinds.items() if v)
        out = []
        while left and len(out) < n:
            k = rng.choices(left, weights=[float(w.get(k, 1.0)) for k in left])[0]
            out.append(k)
            left.remove(k)
        return out

    def _variants(self, s: Scene, n: int, rng: random.Random, balanced: bool) -> list[Scene]:
        """`n` variants of `s`, each after one edit (of distinct kinds when `balanced`)."""
        kinds = edit_kinds(s)
        if not balanced:
            edits = [e for k, v in kinds.items() if k != "identity" for e in v]
            return [apply_edit(s, e) for e in rng.sample(edits, min(n, len(edits)))]
        return [apply_kind(s, kinds, k, rng) for k in self._kinds(kinds, n, rng)]

    def batch(self, step: int, rank: int, rng: random.Random
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(images B×3×H×W, tokens of the B captions then the hard-negative captions, `same`
        B×T: text t also describes image i)."""
        bs, k = int(self.x["batch_size"]), int(self.x.get("group_size", 2))
        balanced = step >= int(self.x.get("balanced_pairs_from", 0))
        scenes: list[Scene] = []
        for _ in range(int(bs * float(self.x["pair_fraction"])) // k):
            s = sample_scene(rng, allow_novel=False)
            scenes += [s] + self._variants(s, k - 1, rng, balanced)
        scenes += [sample_scene(rng, allow_novel=False) for _ in range(bs - len(scenes))]
        images = [render(s, self.size, rng.randrange(1 << 30)) for s in scenes]
        seeds = [rng.randrange(1 << 30) for _ in scenes]  # one caption RNG per image, replayed
        texts = [train_caption(s, random.Random(sd)) for s, sd in zip(scenes, seeds)]
        text_scenes = list(scenes)
        for s, sd, pos in zip(scenes, seeds, list(texts)):
            kinds = edit_kinds(s)
            for _ in range(int(self.x.get("text_negatives", 0))):
                for _try in range(4):  # a caption silent on the change would be a false negative
                    other = apply_kind(s, kinds, self._kinds(kinds, 1, rng)[0], rng)
                    neg = train_caption(other, random.Random(sd))
                    if neg != pos:
                        texts.append(neg)
                        text_scenes.append(other)
                        break
        ids: dict = {}
        img_key = torch.tensor([ids.setdefault(s.key(), len(ids)) for s in scenes])
        txt_key = torch.tensor([ids.setdefault(s.key(), len(ids)) for s in text_scenes])
        words: dict = {}
        img_words = torch.tensor([words.setdefault(t, len(words)) for t in texts[:len(scenes)]])
        txt_words = torch.tensor([words.setdefault(t, len(words)) for t in texts])
        same = (img_key[:, None] == txt_key[None]) | (img_words[:, None] == txt_words[None])
        return to_tensor(images), self.tokenizer(texts), same

    def loss(self, model, batch) -> tuple[torch.Tensor, dict[str, float]]:
        dev = next(model.parameters()).device
        images, tokens, same = (t.to(dev) for t in batch)
        m = getattr(model, "module", model)
        img = F.normalize(m.encode_image(images), dim=-1)
        txt = F.normalize(encode_tokens(m, tokens), dim=-1)  # trimmed: ~40 of 64 tokens used
        scale = m.logit_scale.exp().clamp(max=100)
        n = len(img)
        labels = torch.arange(n, device=dev)
        ignore = same & ~torch.eye(n, same.shape[1], dtype=torch.bool, device=dev)
        logits = (scale * img @ txt.T).masked_fill(ignore, float("-inf"))  # B × (B + negatives)
        loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits[:, :n].T, labels)) / 2
        return loss, {"loss": loss.item(), "scale": float(scale.detach())}

    def validate(self) -> dict[str, float]:
        return evaluate(self.model, self.tokenizer, self.size, int(self.x["val_scenes"]),
                        int(self.x["probe_scenes"]), self.held)

    def after_run(self, clock: dict) -> None:
        self.clock = {**clock, "cpu_count": os.cpu_count()}

    def export(self, out_dir: Path, metrics: dict[str, float]) -> None:
        dest = Path(self.x.get("export_dir") or out_dir / "export")
        save_backbone_dir(self.model, TINY_MODEL, dest, extra={
            "heldout_metrics": metrics, "training": self.clock,
            "recipe": {"loop": {k: v for k, v in vars(self.cfg).items() if k != "extra"}, **self.x}})
        print(json.dumps({"exported": str(dest), **metrics, **self.clock}))


def main(argv: list[str] | None = None) -> dict[str, float]:
    cfg, resume, _ = parse_cli(DEFAULTS, argv, __doc__)
    return run(BackboneTask(cfg), cfg, resume=resume)


if __name__ == "__main__":
    main()
