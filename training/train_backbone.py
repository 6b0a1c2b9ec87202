"""Train the tiny open_clip backbone (`cir-tiny-vit`) on the generated world, CLIP-style.

    python -m training.train_backbone [--config FILE] [key=value ...]

Half of every batch is pairs (scene, the same scene after one atomic edit): the captions of a
pair differ in one attribute, so the contrastive loss cannot ignore fine attributes (position
above all, the hard one). From `balanced_pairs_from` on, the kind of change is drawn first
(identity swaps included), so rare kinds get their share of hard negatives. Validation is text→image retrieval over held-out scenes (held-out
attribute combinations included) plus a zero-shot probe per attribute.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from cir_core.backbone import TINY_MODEL, register_project_configs, save_backbone_dir
from cir_core.text_tower import encode_tokens
from cir_core.world import apply_edit, caption, possible_edits, render, sample_scene
from cir_core.world.spec import N_IDENTITIES, Scene

from .loop import LoopConfig, parse_cli, run
from .registry import CONFIGS, Trainer, register_trainer



@dataclass
class BackboneSettings(LoopConfig):
    """The backbone trainer's settings: the loop's, the batch composition, validation sizes."""

    steps: int = 4000
    lr: float = 1e-3
    weight_decay: float = 0.1
    warmup: int = 200
    eval_every: int = 1000
    ckpt_every: int = 250
    out_dir: str = "runs/backbone"
    batch_size: int = 128
    pair_fraction: float = 0.5  # share of the batch made of (scene, scene after one edit) pairs
    balanced_pairs_from: int = 1 << 60  # from this step, pairs draw the kind of change first
    val_scenes: int = 1000
    probe_scenes: int = 200
    export_dir: str | None = None


DEFAULTS = BackboneSettings()
register_trainer(Trainer("backbone", "training.train_backbone", f"{CONFIGS}/backbone_tiny.json",
                         run_dir="runs/backbone", stage=0))

MEAN = torch.tensor((0.48145466, 0.4578275, 0.40821073)).view(3, 1, 1)
STD = torch.tensor((0.26862954, 0.26130258, 0.27577711)).view(3, 1, 1)
PROBE_OPS = ("background", "char_move", "char_face", "colour", "size", "shape", "move")


def to_tensor(images: list) -> torch.Tensor:
    """Same arithmetic as open_clip's eval transform on an image already at model size."""
    arr = torch.from_numpy(np.stack([np.asarray(im, dtype=np.uint8) for im in images]))
    return (arr.permute(0, 3, 1, 2).float() / 255.0 - MEAN) / STD


def train_caption(scene: Scene, rng: random.Random) -> str:
    r = rng.random()
    if r < 0.8:
        return caption(scene, rng)
    if r < 0.9:
        return caption(scene, rng, name=False)
    return caption(scene, rng, background=rng.random() < 0.5, character=rng.random() < 0.5)


class BackboneTask:
    def __init__(self, cfg: BackboneSettings):
        import open_clip

        register_project_configs()
        self.cfg = cfg
        self.size = 64
        self.model = open_clip.create_model(TINY_MODEL, pretrained=None)
        self.tokenizer = open_clip.get_tokenizer(TINY_MODEL)
        vrng = random.Random("backbone-val")
        self.val_scenes = [sample_scene(vrng) for _ in range(cfg.val_scenes)]
        self.val_seeds = [vrng.randrange(1 << 30) for _ in self.val_scenes]
        self.val_caps = [caption(s, vrng) for s in self.val_scenes]

    def param_groups(self, cfg: LoopConfig) -> list[dict]:
        decay, no_decay = [], []
        for n, p in self.model.named_parameters():
            (no_decay if p.ndim < 2 or "logit_scale" in n or "embedding" in n else decay).append(p)
        return [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]

    def batch(self, step: int, rank: int, rng: random.Random) -> tuple[torch.Tensor, torch.Tensor]:
        bs = self.cfg.batch_size
        n_pairs = int(bs * self.cfg.pair_fraction) // 2
        scenes: list[Scene] = []
        balanced = step >= self.cfg.balanced_pairs_from
        for _ in range(n_pairs):
            s = sample_scene(rng, allow_novel=False)
            scenes += [s, self._partner(s, rng, balanced)]
        scenes += [sample_scene(rng, allow_novel=False) for _ in range(bs - len(scenes))]
        images = [render(s, self.size, rng.randrange(1 << 30)) for s in scenes]
        texts = [train_caption(s, rng) for s in scenes]
        return to_tensor(images), self.tokenizer(texts)

    @staticmethod
    def _partner(s: Scene, rng: random.Random, balanced: bool) -> Scene:
        """The scene after one random change. Uniform over edits, "add" dominates (~80 % of all
        edits); `balanced` picks the kind of change first, identity swaps included, so every
        attribute (character position and facing, identity) gets hard negatives."""
        edits = [e for e in possible_edits(s) if not apply_edit(s, e).is_novel()]
        if not balanced:
            return apply_edit(s, rng.choice(edits))
        ops = sorted({e.op for e in edits}) + ["identity"]
        op = rng.choice(ops)
        if op == "identity":
            while True:
                other = replace(s, character=replace(s.character, identity=rng.randrange(N_IDENTITIES)))
                if other.character.identity != s.character.identity and not other.is_novel():
                    return other
        return apply_edit(s, rng.choice([e for e in edits if e.op == op]))

    def loss(self, model, batch) -> tuple[torch.Tensor, dict[str, float]]:
        dev = next(model.parameters()).device
        images, tokens = (t.to(dev) for t in batch)
        m = getattr(model, "module", model)
        img = F.normalize(m.encode_image(images), dim=-1)
        txt = F.normalize(encode_tokens(m, tokens), dim=-1)  # trimmed: ~40 of 64 tokens used
        scale = m.logit_scale.exp().clamp(max=100)
        logits = scale * img @ txt.T
        labels = torch.arange(len(img), device=dev)
        loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
        return loss, {"loss": loss.item(), "scale": float(scale.detach())}

    @torch.no_grad()
    def _encode(self, images: list | None = None, texts: list[str] | None = None) -> torch.Tensor:
        dev = next(self.model.parameters()).device
        if images is not None:
            feats = [self.model.encode_image(to_tensor(images[i:i + 256]).to(dev))
                     for i in range(0, len(images), 256)]
        else:
            feats = [encode_tokens(self.model, self.tokenizer(texts[i:i + 512]).to(dev))
                     for i in range(0, len(texts), 512)]
        return F.normalize(torch.cat(feats).float(), dim=-1).cpu()

    def validate(self) -> dict[str, float]:
        img = self._encode(images=[render(s, self.size, sd) for s, sd in zip(self.val_scenes, self.val_seeds)])
        txt = self._encode(texts=self.val_caps)
        sims = txt @ img.T
        ranks = (sims > sims.diag()[:, None]).sum(1)
        i2t = ((sims.T > sims.diag()[:, None]).sum(1) == 0).float().mean().item()
        out = {"t2i_R@1": (ranks < 1).float().mean().item(), "t2i_R@5": (ranks < 5).float().mean().item(),
               "i2t_R@1": i2t}
        out.update(self.probe(img))
        return {k: round(v, 4) for k, v in out.items()}

    def probe(self, img: torch.Tensor) -> dict[str, float]:
        """Zero-shot accuracy per attribute: the true caption vs the same caption with that one
        attribute changed to every other value (identical phrasing)."""
        n = self.cfg.probe_scenes
        hits: dict[str, list[float]] = {op: [] for op in PROBE_OPS + ("identity",)}
        for i, s in enumerate(self.val_scenes[:n]):
            seed = f"probe:{i}"
            first = s.objects[0].shape
            groups = {op: [apply_edit(s, e) for e in possible_edits(s, (op,))
                           if e.target in (None, first)] for op in PROBE_OPS}
            groups["identity"] = [Scene(s.background, type(s.character)(k, s.character.position,
                                  s.character.facing), s.objects) for k in range(24) if k != s.character.identity]
            for op, alts in groups.items():
                if not alts:
                    continue
                caps = [caption(x, random.Random(seed)) for x in [s] + alts]
                t = self._encode(texts=caps)
                hits[op].append(float((t @ img[i]).argmax().item() == 0))
        return {f"probe_{k}": float(np.mean(v)) for k, v in hits.items() if v}

    def export(self, out_dir: Path, metrics: dict[str, float]) -> None:
        dest = Path(self.cfg.export_dir or out_dir / "export")
        save_backbone_dir(self.model, TINY_MODEL, dest, extra={"heldout_metrics": metrics,
                                                               "recipe": self.cfg.to_dict()})
        print(json.dumps({"exported": str(dest), **metrics}))


def main(argv: list[str] | None = None) -> dict[str, float]:
    cfg, resume, _ = parse_cli(DEFAULTS, argv, __doc__)
    return run(BackboneTask(cfg), cfg, resume=resume)


if __name__ == "__main__":
    main()
