"""What the Pic2Word, SEARLE and LinCIR trainers share: their settings, a task skeleton on the
shared loop (φ only, optional EMA, the best-validated φ kept if asked; validation, λ on val and
the export are `training.task`'s, as for every method trainer), and
the world's stand-ins for the authors' corpora (SEARLE's concept dictionary and GPT phrases,
LinCIR's captions and spaCy keywords). The text tower is frozen throughout, as published.
"""
from __future__ import annotations

import copy
import json
import re
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from cir_core.encoder import Encoder, Towers
from cir_core.methods import get_method_class
from cir_core.methods.pseudoword import PROMPT
from cir_core.world.language import BG_PHRASE, SIZE_WORD
from cir_core.world.spec import COLOURS, NAMES, SHAPES

from .heads import EMAWrapper
from .loop import LoopConfig
from .task import CachedHeadTask, HeadSettings


def raw_image_norm(backbone: Towers, n: int = 64, seed: int = 0) -> float:
    """Mean norm of the backbone's *unnormalised* image features over `n` scenes of the world's
    training stream: what stands in for the raw CLIP features the authors' φ reads."""
    from itertools import islice

    from cir_core.world import query_stream, render

    imgs = [render(q.reference, backbone.image_size, q.ref_seed) for q in islice(query_stream(seed), n)]
    with torch.inference_mode():
        feats = backbone.model.encode_image(backbone.image_tensor(imgs)).float()
    return round(float(feats.norm(dim=-1).mean()), 4)


@dataclass
class TextInvSettings(HeadSettings):
    """The loop's and the heads' settings (backbone, embed cache, val, λ grid, export) plus
    AdamW's betas / eps and whether biases take weight decay. EMA is off unless asked for
    (none of the three papers' recipes uses one on φ); no gradient clipping (none of them clips)."""

    schedule: str = "cosine"
    grad_clip: float = 0.0
    ema: float = 0.0
    val_queries: int = 500
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    decay_biases: bool = True
    keep_best: str = ""  # a validation metric (e.g. "val_R@1"): export the best-validated φ, not the last


class PhiModule(EMAWrapper):
    """What the loop trains and checkpoints: φ, its EMA, and (with `keep_best`) the weights of
    the best validation so far with their value and step (LinCIR's `phi_best`), kept in the
    state dict so that a resumed run keeps them too."""

    def __init__(self, net: torch.nn.Module, decay: float, keep_best: bool):
        super().__init__(net, decay)
        self.keep_best = keep_best
        if keep_best:
            self.best = copy.deepcopy(net).requires_grad_(False)
            self.register_buffer("best_value", torch.tensor(float("-inf")))
            self.register_buffer("best_step", torch.tensor(-1, dtype=torch.long))

    @torch.no_grad()
    def offer(self, value: float, step: int, state: dict) -> bool:
        """Keep `state` if `value` beats the best so far (ties keep the earlier one)."""
        if not self.keep_best or value <= float(self.best_value):
            return False
        self.best.load_state_dict(state)
        self.best_value.fill_(value)
        self.best_step.fill_(step)
        return True

    def offer_metrics(self, metrics: dict[str, float], key: str, step: int) -> bool:
        """`offer` the averaged weights under validation metric `key` (none kept when `key` is
        empty or nothing was validated); a `key` the validation does not report stops the run."""
        if not key or not metrics:
            return False
        if key not in metrics:
            raise SystemExit(f"keep_best={key!r} is not a validation metric: {sorted(metrics)}")
        return self.offer(float(metrics[key]), step, self.averaged_state())


class TextInvTask(CachedHeadTask):
    """A φ trainer on the shared loop. Subclasses set `method_name`, call `setup`, and implement
    `batch` and `loss`. `self.method` holds the φ being trained (its mapper is `self.model.net`);
    `self.evaluated` receives the (EMA) weights for validation and export."""

    method_name: str
    cfg: TextInvSettings

    def setup(self, cfg: TextInvSettings, backbone: Towers | None = None) -> None:
        self.t0 = time.time()
        self.clock: dict = {}  # the loop's, over every session (after_run)
        super().setup(cfg, backbone)
        cls = get_method_class(self.method_name)
        arch = cls.config_cls.from_dict(cfg.to_dict())
        if arch.input_scale <= 0:  # 0: the backbone's own raw image-feature norm (see textinv)
            arch.input_scale = raw_image_norm(self.backbone)
        self.arch = arch
        with torch.random.fork_rng(devices=[]):  # φ's init depends on the seed only
            torch.manual_seed(cfg.seed)
            self.method = cls(self.backbone, {"arch": arch.to_dict()})
        self.method.mapper.train()
        self.model = PhiModule(self.method.mapper, cfg.ema, bool(cfg.keep_best))
        self.step = 0
        self.evaluated = cls(self.backbone, {"arch": arch.to_dict()})
        self.setup_seconds = round(time.time() - self.t0, 1)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # -- optimisation ---------------------------------------------------------------------------
    def param_groups(self, cfg: LoopConfig) -> list[dict]:
        x = self.cfg
        extra = {"betas": (x.beta1, x.beta2), "eps": x.eps}
        params = [p for p in self.model.net.parameters() if p.requires_grad]
        if x.decay_biases:
            return [{"params": params, "weight_decay": x.weight_decay, **extra}]
        return [{"params": [p for p in params if p.ndim >= 2], "weight_decay": x.weight_decay, **extra},
                {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0, **extra}]

    def before_step(self, step: int, optimizer: Any) -> None:
        self.step = step
        super().before_step(step, optimizer)

    # -- validation and export ------------------------------------------------------------------
    def validate(self) -> dict[str, float]:
        metrics = super().validate()
        self.model.offer_metrics(metrics, self.cfg.keep_best, self.step + 1)
        return metrics

    def after_run(self, clock: dict) -> None:
        """The loop's clock over every session of a resumed run (training.loop.run_clock)."""
        self.clock = clock

    def wall_minutes(self) -> float:
        """Minutes of the whole run, every resumed session counted (this session only when the
        loop gave no clock)."""
        seconds = self.clock.get("wall_time_s") or (time.time() - self.t0)
        return round(seconds / 60, 1)

    def kept_best(self) -> bool:
        return bool(self.cfg.keep_best) and int(self.model.best_step) >= 0

    def export_method(self):
        """The (EMA) φ, or with `keep_best` the best-validated one rather than the last."""
        m = self.eval_method()
        if self.kept_best():
            m.mapper.load_state_dict(self.model.best.state_dict())
        return m

    def record(self, metrics: dict[str, float]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.kept_best():
            out = {"selected_step": int(self.model.best_step), "selected_by": self.cfg.keep_best,
                   f"selected_{self.cfg.keep_best}": round(float(self.model.best_value), 4),
                   "last_step_metrics": dict(metrics)}
            metrics = {}
        return {**out, **super().record(metrics), "wall_minutes": self.wall_minutes(), **self.extra_metrics()}

    def extra_metrics(self) -> dict[str, Any]:
        return {"setup_seconds": self.setup_seconds}


def cache_texts(cache) -> list[str]:
    """Every distinct text of the embed cache, by row (texts.json)."""
    return json.loads((cache.folder / "texts.json").read_text())


def caption_rows(cache) -> np.ndarray:
    """Rows of the cache's texts that are captions (reference, target and negative captions of
    the training queries), sorted and distinct."""
    return np.unique(np.concatenate([cache.ref_caption, cache.target_caption, cache.neg_idx]))


# -- SEARLE: the world's concept dictionary and its "GPT phrases" -------------------------------
def world_concepts() -> list[str]:
    """The world's stand-in for the Open Images class list SEARLE ranks per image: the shapes,
    every colour + shape, the eight backgrounds (their caption phrase without the article) and
    the 24 character names."""
    bgs = [p.split(" ", 1)[1] for p in BG_PHRASE.values()]
    return [*SHAPES, *(f"{c} {s}" for c in COLOURS for s in SHAPES), *bgs, *NAMES]


def concept_pattern(concept: str) -> re.Pattern:
    """The concept as whole words (so 'star' does not match 'starry')."""
    return re.compile(rf"(?<![\w]){re.escape(concept)}(?![\w])")


def concept_phrases(captions: Sequence[str], concepts: Sequence[str], per_concept: int = 256,
                    seed: int = 0) -> dict[str, list[str]]:
    """The world's stand-in for SEARLE's GPT-Neo phrases (`gpt_phrases_generation.py`: 256
    continuations of "a photo of {concept} that"): up to `per_concept` training captions that
    contain the concept. A concept with none (a held-out colour + shape) is left out, as SEARLE
    filters out concepts its phrases do not contain."""
    rng = np.random.default_rng(seed)
    out = {}
    for c in concepts:
        pat = concept_pattern(c)
        hits = [t for t in captions if c in t and pat.search(t)]  # substring test first: fast
        if hits:
            pick = rng.choice(len(hits), size=min(per_concept, len(hits)), replace=False)
            out[c] = [hits[i] for i in sorted(pick)]
    return out


def replace_concept(phrase: str, concept: str, count: int = 1) -> str:
    """`phrase.replace(concept, " $ ", count)` on whole words, whitespace collapsed."""
    return " ".join(concept_pattern(concept).sub(" $ ", phrase, count=count).split())


# PALAVRA's templates, as SEARLE's `utils.get_templates` lists them (OTI and concept ranking)
TEMPLATES = (
    "This is a photo of a {}", "This photo contains a {}", "A photo of a {}",
    "This is an illustration of a {}", "This illustration contains a {}", "An illustrations of a {}",
    "This is a sketch of a {}", "This sketch contains a {}", "A sketch of a {}",
    "This is a diagram of a {}", "This diagram contains a {}", "A diagram of a {}", "A {}",
    "We see a {}", "{}", "We see a {} in this photo", "We see a {} in this image",
    "We see a {} in this illustration", "We see a {} photo", "We see a {} image",
    "We see a {} illustration", "{} photo", "{} image", "{} illustration",
)


def concept_embeddings(backbone: Encoder, concepts: Sequence[str]) -> np.ndarray:
    """SEARLE's `image_concepts_association.py`: each concept's text embedding is the
    normalised mean of the normalised embeddings of the 24 templates filled with f" {concept} "."""
    out = []
    for c in concepts:
        e = backbone.encode_texts([t.format(f" {c} ") for t in TEMPLATES]).mean(0)
        out.append(e / np.linalg.norm(e))
    return np.stack(out).astype(np.float32)


def top_concepts(images: np.ndarray, concept_emb: np.ndarray, k: int) -> np.ndarray:
    """(N, k) indices of each image's most similar concepts, best first."""
    sim = images @ concept_emb.T
    return np.argsort(-sim, axis=1, kind="stable")[:, :k]


# -- LinCIR: keyword masking on the world's captions ---------------------------------------------
# spaCy's parts of speech for the world's closed vocabulary (LinCIR's `extract_keywords_spacy`
# keeps runs of NOUN / PROPN / ADJ / DET). The world's captions are generated from a known
# grammar, so the tags are known exactly; en_core_web_sm is not needed.
_DET = {"a", "an", "the"}
_ADJ = {*COLOURS, *(w for v in SIZE_WORD.values() for w in v[:2]), "grassy", "sandy", "snowy", "starry"}
_NOUN = {*SHAPES, "character", "figure", "meadow", "beach", "desert", "field", "night", "city",
         "street", "pine", "forest", "sunset", "left", "middle", "right"}
_PROPN = {n.lower() for n in NAMES}
_WORD = re.compile(r"\w+|[^\w\s]")


def pos_tag(word: str, previous: str | None) -> str:
    w = word.lower()
    if w in _DET:
        return "DET"
    if w in _PROPN:
        return "PROPN"
    if w in ("left", "right") and previous == "facing":  # "facing left": an adverb, not "the left"
        return "ADV"
    if w in _NOUN:
        return "NOUN"
    if w in _ADJ:
        return "ADJ"
    return "PUNCT" if not w[0].isalnum() else "OTHER"


def extract_keywords(caption: str) -> list[str]:
    """LinCIR `loader.py: extract_keywords_spacy`: the runs of NOUN / PROPN / ADJ / DET tokens,
    each joined by spaces, in order."""
    runs, cur, prev = [], [], None
    for w in _WORD.findall(caption):
        if pos_tag(w, prev) in ("NOUN", "PROPN", "ADJ", "DET"):
            cur.append(w)
        elif cur:
            runs.append(" ".join(cur))
            cur = []
        prev = w.lower()
    if cur:
        runs.append(" ".join(cur))
    return runs


def clean_caption(caption: str) -> str:
    """LinCIR `loader.py: clean_caption`: lower case, no '$', stripped."""
    return caption.lower().replace("$", "").strip()


def mask_keywords(caption: str, rng: Any) -> str:
    """LinCIR `CaptionDataset.__getitem__`: every keyword (all its occurrences, plain substring
    replacement as their code does) becomes the pseudo-word `$`; when a keyword is empty or not
    in the caption, one random word is replaced instead and the loop stops; a caption without
    words becomes "a photo of $ that {caption}". `caption` is already cleaned."""
    keywords = extract_keywords(caption) or [""]
    replaced = caption
    for kw in keywords:
        if kw != "" and kw in caption:
            replaced = replaced.replace(kw, " $ ")
        else:
            words = caption.split(" ")
            if caption:
                replaced = replaced.replace(rng.choice(words), " $ ")
            else:
                replaced = PROMPT.format(edit=caption)  # loader.py's "a photo of $ that {caption}"
            break
    return " ".join(replaced.split())
