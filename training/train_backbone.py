"""Train the tiny open_clip backbone (`cir-tiny-vit`) on the generated world, CLIP-style.

    python -m training.train_backbone [--config FILE] [key=value ...]

Part of every batch is groups: a scene and `group_size - 1` variants of it, each after one
atomic edit of a different kind (`pair_fraction` of the batch; pairs when `group_size` is 2).
Their captions differ in one attribute, so the contrastive loss cannot ignore fine attributes
(positions, facing, identity: the hard ones). From `balanced_pairs_from` on, the kind of change
is drawn first (identity swaps included, weighted by `op_weights`), so rare kinds get their
share; before, an edit is drawn uniformly ("add" is ~80 % of all edits).

`aux_weight` > 0 adds linear attribute heads (character position, facing, identity, background,
shape/colour/size per slot), shared by both towers' normalised embeddings and trained with the
train split's ground truth; a caption is not asked what it is silent on. They are never exported.
`text_negatives` adds, per image, that many captions of its scene after one edit, with the same
phrasing (NegCLIP-style hard negatives for the image→text side). A text that also describes
another image of the batch (same scene, or the same words) is not used as a negative for it.
Validation is `training.backbone_val.evaluate`: text→image retrieval over held-out scenes plus
a zero-shot probe per attribute.
"""
from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from cir_core.backbone import (
    TINY_MODEL,
    load_weights_into,
    random_init_on_purpose,
    register_project_configs,
    save_backbone_dir,
)
from cir_core.text_tower import encode_tokens
from cir_core.world import apply_edit, caption, possible_edits, render, sample_scene
from cir_core.world.spec import BACKGROUNDS, COLOURS, FACINGS, N_IDENTITIES, POSITIONS, SHAPES, SIZES, Scene

from .backbone_films import SLOT_HEADS, film_caption, film_part, frame_key, slot_labels
from .backbone_val import Encoder, evaluate, heldout_set, to_tensor
from .loop import LoopConfig, parse_cli, run
from .registry import CONFIGS, Trainer, register_trainer

FULL = {"name": True, "character": True, "background": True}



@dataclass
class BackboneSettings(LoopConfig):
    """The backbone trainer's settings: the loop's, the batch composition, the attribute heads,
    validation sizes."""

    model: str = TINY_MODEL  # an open_clip or cir_core/model_configs name (the recipe: cir-tiny-rn)
    steps: int = 4000
    lr: float = 1e-3
    weight_decay: float = 0.1
    warmup: int = 200
    eval_every: int = 1000
    ckpt_every: int = 250
    out_dir: str = "runs/backbone"
    batch_size: int = 128
    pair_fraction: float = 0.5  # share of the batch made of groups (a scene and its variants)
    group_size: int = 2  # a scene and group_size - 1 variants, each after one edit
    balanced_pairs_from: int = 0  # from this step, the kind of change is drawn first
    op_weights: dict = field(default_factory=dict)  # kind -> weight when drawing kinds
    text_negatives: int = 0  # NegCLIP-style captions of edited scenes per image
    aux_weight: float = 0.0  # attribute heads' loss weight (0: no heads)
    aux_scale: float = 10.0
    val_scenes: int = 1000
    probe_scenes: int = 200
    film_fraction: float = 0.0  # share of the batch that is film keyframes (training.backbone_films)
    film_pair_fraction: float = 0.5  # share of the film part made of pairs
    film_pose_pairs: float = 0.0  # share of those pairs that change one figure's pose alone
    init: str | None = None  # a local-dir backbone folder whose weights start the run (fine-tuning)
    export_dir: str | None = None


DEFAULTS = BackboneSettings()
register_trainer(Trainer("backbone", "training.train_backbone", f"{CONFIGS}/backbone_tiny.json",
                         run_dir="runs/backbone", stage=0))
__all__ = ["BackboneSettings", "BackboneTask", "main", "to_tensor", "train_caption"]


# Attribute heads (training only, never exported): scene attribute -> number of classes; an
# object attribute per slot has one more class, "no object there".
AUX_HEADS = {"char_position": len(POSITIONS), "facing": len(FACINGS), "identity": N_IDENTITIES,
             "background": len(BACKGROUNDS),
             **{f"{slot}_{attr}": len(values) + 1 for slot in POSITIONS
                for attr, values in (("shape", SHAPES), ("colour", COLOURS), ("size", SIZES))}}


def caption_mode(rng: random.Random) -> dict[str, bool]:
    """What a training caption says: 80 % everything, 10 % "a character" for the name, 10 %
    partial (background and/or character left out)."""
    r = rng.random()
    if r < 0.8:
        return {"name": True, "character": True, "background": True}
    if r < 0.9:
        return {"name": False, "character": True, "background": True}
    background = rng.random() < 0.5
    return {"name": True, "character": rng.random() < 0.5, "background": background}


def train_caption(scene: Scene, rng: random.Random) -> str:
    return caption(scene, rng, **caption_mode(rng))


def attribute_labels(s: Scene, mode: dict[str, bool] | None = None) -> list[int]:
    """One class index per `AUX_HEADS` entry; -100 (ignored) where a caption in `mode` is silent."""
    c = s.character
    said = mode or {"name": True, "character": True, "background": True}
    out = [POSITIONS.index(c.position) if said["character"] else -100,
           FACINGS.index(c.facing) if said["character"] else -100,
           c.identity if said["character"] and said["name"] else -100,
           BACKGROUNDS.index(s.background) if said["background"] else -100]
    for slot in POSITIONS:
        o = next((o for o in s.objects if o.position == slot), None)
        out += [0 if o is None else 1 + values.index(getattr(o, attr))
                for attr, values in (("shape", SHAPES), ("colour", COLOURS), ("size", SIZES))]
    return out


def film_attribute_labels(k, mode: dict[str, bool]) -> list[int]:
    """`attribute_labels` of a film keyframe: the place and the props per slot (when the caption
    says them); the world's single-character heads are not asked."""
    s = k.state
    out = [-100, -100, -100, BACKGROUNDS.index(s.place) if mode["background"] else -100]
    for slot in POSITIONS:
        o = next((o for o in s.objects if o.position == slot), None)
        out += [-100 if not mode["props"] else 0 if o is None else 1 + values.index(getattr(o, attr))
                for attr, values in (("shape", SHAPES), ("colour", COLOURS), ("size", SIZES))]
    return out


class WithHeads(torch.nn.Module):
    """The CLIP model plus linear attribute heads shared by both towers (training only)."""

    def __init__(self, clip: torch.nn.Module, dim: int, scale: float = 10.0,
                 heads: dict[str, int] | None = None) -> None:
        super().__init__()
        self.sizes = list((heads or AUX_HEADS).values())
        self.clip, self.heads = clip, torch.nn.Linear(dim, sum(self.sizes))
        self.scale = scale  # the features are unit vectors: a fixed gain lets the heads be sure

    def attribute_loss(self, feats: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean over heads of the cross-entropy on the labelled rows."""
        losses = []
        logits = self.heads(self.scale * feats).split(self.sizes, dim=1)
        for lg, y in zip(logits, labels.T):
            if (y != -100).any():
                losses.append(F.cross_entropy(lg, y, ignore_index=-100))
        return torch.stack(losses).mean()


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
    def __init__(self, cfg: BackboneSettings):
        import open_clip

        register_project_configs()
        self.cfg = cfg
        with random_init_on_purpose():  # trained from scratch, or the init folder's weights follow
            self.clip = open_clip.create_model(cfg.model, pretrained=None)
        if cfg.init:  # fine-tuning: start from a backbone folder's weights
            load_weights_into(self.clip, Path(cfg.init) / "open_clip_model.safetensors", cfg.model)
        model_cfg = open_clip.get_model_config(cfg.model)
        self.size, dim = int(model_cfg["vision_cfg"]["image_size"]), int(model_cfg["embed_dim"])
        heads = {**AUX_HEADS, **(SLOT_HEADS if cfg.film_fraction else {})}
        self.model = WithHeads(self.clip, dim, cfg.aux_scale, heads) if cfg.aux_weight else self.clip
        self.tokenizer = open_clip.get_tokenizer(cfg.model)
        self.held = heldout_set(max(cfg.val_scenes, cfg.probe_scenes))
        self.clock: dict = {}

    def param_groups(self, cfg: LoopConfig) -> list[dict]:
        decay, no_decay = [], []
        for n, p in self.model.named_parameters():
            (no_decay if p.ndim < 2 or "logit_scale" in n or "embedding" in n else decay).append(p)
        return [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]

    def _kinds(self, kinds: dict[str, list], n: int, rng: random.Random) -> list[str]:
        """`n` distinct edit kinds (fewer if the scene has fewer), weighted by `op_weights`."""
        w = self.cfg.op_weights or {}
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

    def batch(self, step: int, rank: int, rng: random.Random) -> tuple[torch.Tensor, ...]:
        """(images B×3×H×W, tokens of the B captions then the hard-negative captions, `same`
        B×T: text t also describes image i, attribute labels of the images and of the texts)."""
        n_film = int(self.cfg.batch_size * self.cfg.film_fraction)
        bs, k = self.cfg.batch_size - n_film, self.cfg.group_size
        balanced = step >= self.cfg.balanced_pairs_from
        scenes: list[Scene] = []
        for _ in range(int(bs * self.cfg.pair_fraction) // k):
            s = sample_scene(rng, allow_novel=False)
            scenes += [s] + self._variants(s, k - 1, rng, balanced)
        scenes += [sample_scene(rng, allow_novel=False) for _ in range(bs - len(scenes))]
        images = [render(s, self.size, rng.randrange(1 << 30)) for s in scenes]
        seeds = [rng.randrange(1 << 30) for _ in scenes]  # one caption RNG per image, replayed
        modes = [caption_mode(random.Random(sd)) for sd in seeds]
        texts = [train_caption(s, random.Random(sd)) for s, sd in zip(scenes, seeds)]
        frames = film_part(n_film, self.cfg.film_pair_fraction, rng, self.cfg.film_pose_pairs) if n_film else []
        film_caps = [film_caption(f, rng.randrange(1 << 30)) for f in frames]
        text_scenes, text_modes = list(scenes), list(modes)
        for s, sd, mode, pos in zip(scenes, seeds, modes, list(texts) if self.cfg.text_negatives else []):
            kinds = edit_kinds(s)  # not computed at all without text negatives (the recipe's case)
            for _ in range(self.cfg.text_negatives):
                for _try in range(4):  # a caption silent on the change would be a false negative
                    other = apply_kind(s, kinds, self._kinds(kinds, 1, rng)[0], rng)
                    neg = train_caption(other, random.Random(sd))
                    if neg != pos:
                        texts.append(neg)
                        text_scenes.append(other)
                        text_modes.append(mode)
                        break
        # the film keyframes follow the world's images and captions, before the negatives
        n = len(scenes)
        images[n:n] = [f.image(self.size) for f in frames]
        texts[n:n] = [c for c, _ in film_caps]
        ids: dict = {}
        keys = [s.key() for s in scenes] + [frame_key(f) for f in frames]
        img_key = torch.tensor([ids.setdefault(x, len(ids)) for x in keys])
        txt_key = torch.tensor([ids.setdefault(x, len(ids)) for x in keys + [s.key() for s in text_scenes[n:]]])
        words: dict = {}
        img_words = torch.tensor([words.setdefault(t, len(words)) for t in texts[:len(images)]])
        txt_words = torch.tensor([words.setdefault(t, len(words)) for t in texts])
        same = (img_key[:, None] == txt_key[None]) | (img_words[:, None] == txt_words[None])
        slots = self.cfg.film_fraction > 0

        def labels(world: list[list[int]], film: list[list[int]]) -> torch.Tensor:
            return torch.tensor(world[:n] + film + world[n:])

        img_labels = labels([attribute_labels(s) + (slot_labels(s) if slots else []) for s in scenes],
                            [film_attribute_labels(f, {"background": True, "props": True}) + slot_labels(f.state)
                             for f in frames])
        txt_labels = labels([attribute_labels(s, m) + (slot_labels(s, m == FULL) if slots else [])
                             for s, m in zip(text_scenes, text_modes)],
                            [film_attribute_labels(f, m) + slot_labels(f.state, m["name"])
                             for f, (_, m) in zip(frames, film_caps)])
        return to_tensor(images), self.tokenizer(texts), same, img_labels, txt_labels

    def loss(self, model, batch) -> tuple[torch.Tensor, dict[str, float]]:
        dev = next(model.parameters()).device
        images, tokens, same, img_labels, txt_labels = (t.to(dev) for t in batch)
        top = getattr(model, "module", model)
        m = top.clip if isinstance(top, WithHeads) else top
        img = F.normalize(m.encode_image(images), dim=-1)
        txt = F.normalize(encode_tokens(m, tokens), dim=-1)  # trimmed: ~40 of 64 tokens used
        scale = m.logit_scale.exp().clamp(max=100)
        n = len(img)
        labels = torch.arange(n, device=dev)
        ignore = same & ~torch.eye(n, same.shape[1], dtype=torch.bool, device=dev)
        logits = (scale * img @ txt.T).masked_fill(ignore, float("-inf"))  # B × (B + negatives)
        loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits[:, :n].T, labels)) / 2
        logs = {"loss": loss.item(), "scale": float(scale.detach())}
        if isinstance(top, WithHeads):
            aux = (top.attribute_loss(img, img_labels) + top.attribute_loss(txt, txt_labels)) / 2
            loss = loss + self.cfg.aux_weight * aux
            logs["aux"] = aux.item()
        return loss, logs

    def validate(self) -> dict[str, float]:
        out = evaluate(self.clip, self.tokenizer, self.size, self.cfg.val_scenes,
                       self.cfg.probe_scenes, self.held)
        if self.cfg.film_fraction:
            from .backbone_val_films import film_probe

            out.update(film_probe(Encoder(self.clip, self.tokenizer, self.size), self.size))
        return out

    def after_run(self, clock: dict) -> None:
        self.clock = {**clock, "cpu_count": os.cpu_count()}

    def export(self, out_dir: Path, metrics: dict[str, float]) -> None:
        dest = Path(self.cfg.export_dir or out_dir / "export")
        save_backbone_dir(self.clip, self.cfg.model, dest, extra={
            "heldout_metrics": metrics, "training": self.clock,
            "recipe": self.cfg.to_dict()})
        print(json.dumps({"exported": str(dest), **metrics, **self.clock}))


def main(argv: list[str] | None = None) -> dict[str, float]:
    cfg, resume, _ = parse_cli(DEFAULTS, argv, __doc__)
    return run(BackboneTask(cfg), cfg, resume=resume)


if __name__ == "__main__":
    main()
