"""CIReVL (Karthik et al., ICLR 2024, "Vision-by-Language for Training-Free Compositional Image
Retrieval"; ExplainableML/Vision_by_Language) as a registered method, an optional column.

Training-free and modular: caption the reference, have a language model rewrite the caption with
the edit ("Edited Description"), and retrieve by text: q = norm(f_T(description)), scored against
the gallery's image embeddings (`src/utils.py: text_encoding`, cosine in `compute_results.py`).
q_∅ is the same with an empty edit, i.e. f_T(the caption): Chord's direction is then what the
rewrite changed. Nothing is trained; what runs is configured (`CIReVLConfig`, from `CIR_CIREVL_*`
variables):

- captioner `bank` (the default): the caption of a caption bank closest to v_r under the frozen
  backbone's image–text similarity: on the world, the distinct reference captions of the world's
  *training* stream (never a val or test caption), else the file `caption_bank` (one a line);
  `given`: the caption the caller passes with the reference (`Refs.captions`); `endpoint`: the
  user's VLM, sent the reference image (`cirevl_llm.py`).
- rewriter `rules` (the world's default, offline: `cirevl_rules.py`) or `endpoint` (the user's
  LLM with CIReVL's prompt). On a backbone that is not the world's there is no default: without an
  endpoint the method refuses to build, naming the variables to set.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from cir_core.backbone_id import is_world_backbone
from cir_core.config import DictConfig
from cir_core.errors import InputError
from cir_core.fileio import atomic_write, loads_json
from cir_core.paths import ASSETS_DIR, cache_dir
from cir_core.timing import one_time_build

from .. import env as environment
from ..encoder import Encoder
from .base import Method, register_method
from .refs import RefInput, Refs

CAPTIONERS = ("bank", "given", "endpoint")
LAMBDA_FILE = ASSETS_DIR / "cirevl-lambda.json"  # training/cirevl_lambda.py writes it (not a method folder: no weights)
REWRITERS = ("rules", "endpoint")
BANK_BLOCK = 256  # captions encoded at a time when a bank is first embedded (its progress steps)


@dataclass
class CIReVLConfig(DictConfig):
    """What CIReVL runs. Each field is read from `CIR_CIREVL_<FIELD>` (e.g. CIR_CIREVL_ENDPOINT)."""

    captioner: str = "bank"
    rewriter: str = ""  # "": rules on the world's backbones, else endpoint (which must be configured)
    endpoint: str = ""  # an OpenAI-compatible base URL (…/v1) or …/chat/completions
    model: str = ""  # the rewriting LLM
    vlm_model: str = ""  # the captioning VLM (default: `model`)
    api_key_var: str = "OPENAI_API_KEY"  # the variable holding the key (the key never enters a config)
    caption_bank: str = ""  # a text file, one caption a line ("": the world's training captions)
    bank_size: int = 5000  # the world's bank: the first N training queries' reference captions

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "CIReVLConfig":
        out = {}
        for f in fields(cls):
            v = environment.read(f"CIR_CIREVL_{f.name.upper()}", env=env)
            if v is not None:
                out[f.name] = int(v) if isinstance(f.default, int) else v
        return cls.from_dict(out)


def world_bank(n: int) -> list[str]:
    """The distinct reference captions of the world's first `n` training queries (kept in
    `cache_dir()/cirevl/`, keyed by `n` and the stream's first captions: generating them is ~4 ms a
    query)."""
    from cir_core.world import query_stream

    head = [q.ref_caption for q in islice(query_stream(0), 4)]
    key = hashlib.sha256(json.dumps([n, head]).encode()).hexdigest()[:16]
    path = cache_dir() / "cirevl" / f"world-bank-{key}.json"
    if path.exists():
        return loads_json(path.read_text(encoding="utf-8"))
    with one_time_build("CIReVL: the world's caption bank", total=n, unit="query") as task:
        texts = []
        for i, q in enumerate(islice(query_stream(0), n)):
            texts.append(q.ref_caption)
            if i % 100 == 99:
                task.update(100)
        task.update(n - task.done)
    texts = list(dict.fromkeys(texts))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: json.dump(texts, f), binary=False)
    return texts


class BankCaptioner:
    """The bank caption nearest to each reference (image–text cosine under the backbone); the
    bank's embeddings are kept in `cache_dir()/cirevl/` per backbone and bank."""

    def __init__(self, backbone: Encoder, texts: Sequence[str] | Callable[[], list[str]], source: str):
        self.backbone, self.source = backbone, source
        self._texts = texts
        self.info = {"mode": "bank", "bank": source}
        self._emb: np.ndarray | None = None

    @property
    def texts(self) -> Sequence[str]:
        """The bank's captions (made on first use)."""
        if callable(self._texts):
            self._texts = list(self._texts())
        if not self._texts:
            raise InputError(f"CIReVL's caption bank {self.source} holds no caption")
        return self._texts

    def embeddings(self) -> np.ndarray:
        if self._emb is None:
            digest = hashlib.sha256(json.dumps([self.backbone.id, self.texts]).encode()).hexdigest()[:20]
            path = cache_dir() / "cirevl" / f"bank-{digest}.npy"
            if path.exists():
                self._emb = np.load(path)
            else:
                texts = self.texts
                with one_time_build("CIReVL: embedding the caption bank", total=len(texts), unit="caption") as task:
                    parts = []
                    for s in range(0, len(texts), BANK_BLOCK):
                        parts.append(self.backbone.encode_texts(texts[s:s + BANK_BLOCK]).astype(np.float32))
                        task.update(len(parts[-1]))
                emb = np.concatenate(parts)
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, lambda f: np.save(f, emb), binary=True)
                self._emb = emb
        return self._emb

    def caption(self, refs: Refs) -> list[str]:
        best = np.argmax(refs.emb @ self.embeddings().T, axis=1)
        return [self.texts[i] for i in best]


class GivenCaptioner:
    """The caption the caller passes with each reference."""

    info = {"mode": "given"}

    def caption(self, refs: Refs) -> list[str]:
        if refs.captions is None or any(c is None for c in refs.captions):
            raise InputError("CIReVL (CIR_CIREVL_CAPTIONER=given) needs a caption with every reference; "
                             "this caller passed none")
        return [str(c) for c in refs.captions]


def val_lambda(method: "CIReVL", path: Path = LAMBDA_FILE) -> tuple[float, str]:
    """(Chord λ, where it came from): the val-chosen one in `path` when it was chosen for this
    backbone and configuration, else the default (and a note saying why)."""
    if not path.is_file():
        return method.chord_lambda, f"no val-chosen λ ({path} missing): default {method.chord_lambda}"
    rec = loads_json(path.read_text(encoding="utf-8"))
    if rec.get("backbone") != method.backbone.id or rec.get("config") != method.config_key():
        return method.chord_lambda, (f"{path} was chosen for {rec.get('backbone')} with another configuration "
                                     f"or backbone: default λ {method.chord_lambda}")
    return float(rec["chord_lambda"]), f"val-chosen ({path}, {rec.get('on')})"


@register_method
class CIReVL(Method):
    name = "cirevl"
    label = "CIReVL"
    order = 27
    app_role = "optional"
    description = "caption the reference, rewrite the caption with the edit (LLM or the world's rules), retrieve by its text"
    config_cls = CIReVLConfig
    reads_whole_text = True  # the rewriter reads the whole edit; the text tower reads the description

    def __init__(self, backbone: Encoder, config: dict | None = None):
        config = dict(config or {})
        config.setdefault("arch", CIReVLConfig.from_env().to_dict())
        super().__init__(backbone, config)
        a: CIReVLConfig = self.arch
        world = is_world_backbone(getattr(backbone, "id", None))
        rewriter = a.rewriter or ("rules" if world else "endpoint")
        self.kinds = (a.captioner, rewriter)
        if "chord_lambda" not in config:
            self.chord_lambda, self.lambda_note = val_lambda(self)
        if a.captioner not in CAPTIONERS or rewriter not in REWRITERS:
            raise InputError(f"CIReVL: captioner must be one of {CAPTIONERS} and rewriter one of {REWRITERS}; "
                             f"got {a.captioner!r}, {rewriter!r}")
        if "endpoint" in (rewriter, a.captioner) and not a.endpoint:
            raise InputError("CIReVL needs a language model on this backbone (its rules rewriter knows only "
                             "the generated world): set CIR_CIREVL_ENDPOINT (an OpenAI-compatible URL) and "
                             "CIR_CIREVL_MODEL, the key in $OPENAI_API_KEY or the variable CIR_CIREVL_API_KEY_VAR names")
        if a.captioner == "bank" and not a.caption_bank and not world:
            raise InputError("CIReVL's caption bank: set CIR_CIREVL_CAPTION_BANK (a text file, one caption a line) "
                             "or CIR_CIREVL_CAPTIONER=endpoint / given on this backbone")
        self.rewriter = self._rewriter(rewriter)
        self.captioner = self._captioner()

    def config_key(self) -> dict[str, Any]:
        """What a val-chosen λ depends on: the captioner, the rewriter and their settings (no key)."""
        return {**self.arch.to_dict(), "captioner": self.kinds[0], "rewriter": self.kinds[1]}

    def _client(self, model: str) -> Any:
        from .cirevl_llm import ChatClient

        return ChatClient(self.arch.endpoint, model, environment.secret(self.arch.api_key_var))

    def _rewriter(self, kind: str) -> Any:
        if kind == "rules":
            from .cirevl_rules import RulesRewriter

            return RulesRewriter()
        from .cirevl_llm import EndpointRewriter

        return EndpointRewriter(self._client(self.arch.model))

    def _captioner(self) -> Any:
        a = self.arch
        if a.captioner == "given":
            return GivenCaptioner()
        if a.captioner == "endpoint":
            from .cirevl_llm import EndpointCaptioner

            return EndpointCaptioner(self._client(a.vlm_model or a.model))
        if a.caption_bank:
            path = Path(a.caption_bank)
            if not path.is_file():
                raise InputError(f"CIReVL's caption bank {path} is not a file")
            lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
            return BankCaptioner(self.backbone, list(dict.fromkeys(ln for ln in lines if ln)), str(path))
        return BankCaptioner(self.backbone, lambda: world_bank(a.bank_size),
                             f"world training stream, first {a.bank_size} queries")

    def descriptions(self, ref: RefInput, texts: Sequence[str]) -> tuple[list[str], list[str]]:
        """(each reference's caption, each edited description): what the query encodes."""
        captions = self.captioner.caption(self._check_ref(ref))
        return captions, [self.rewriter.rewrite(c, str(t)) for c, t in zip(captions, texts)]

    def _compose(self, refs: Refs, texts: list[str]) -> np.ndarray:
        return self.backbone.encode_texts(self.descriptions(refs, texts)[1])
