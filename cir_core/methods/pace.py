"""PACE (seed 002): progressive, sentence-by-sentence accumulation of a long edit.

    s_1..s_n = split_sentences(text)
    q_0 = norm(v_r + t + M([v_r; t]))                      t = f_T(full text), M a gated MLP
    q_k = norm(q_{k−1} + A([q_{k−1}; f_T(s_k)]))           k = 1..n, A shared across steps

The paper feeds reference + full text to "a multimodal encoder"; on frozen CLIP towers the
project's encoder is a gated MLP (DiCE's block) residual to the zero-training sum query
norm(v_r + t), so an untrained M starts at that baseline. A is a second gated MLP whose output
projection starts at zero: each step starts as the identity and learns what a sentence adds.
A single sentence is one step (q_1), or, with `short_direct` (seed 002: "processing short queries
directly"), none: q_0 has read it whole. With no sentence (empty edit) n = 0 and the query is q_0
of the empty text: that is q_∅, Chord's anchor (`compose_empty`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from cir_core.config import DictConfig
from cir_core.text import split_sentences

from .base import register_method
from .refs import RefInput, Refs
from .trained import GatedMLP, TrainedMethod


@dataclass
class PACEConfig(DictConfig):
    """PACE's architecture: the fusion M and the accumulator A, gated MLPs of these widths (× D)."""

    hidden_mult: float = 4.0
    acc_hidden_mult: float = 4.0
    dropout: float = 0.05
    # a one-sentence text is q_0 alone (seed 002); False: one accumulator step, how the shipped
    # tiny checkpoint was trained (its config.json lacks the key)
    short_direct: bool = False


class PACENet(nn.Module):
    def __init__(self, dim: int, cfg: PACEConfig | None = None):
        super().__init__()
        cfg = cfg or PACEConfig()
        self.fusion = GatedMLP(2 * dim, int(cfg.hidden_mult * dim), dim, cfg.dropout, zero_out=True)
        self.accumulator = GatedMLP(2 * dim, int(cfg.acc_hidden_mult * dim), dim, cfg.dropout,
                                    zero_out=True)

    def start(self, v_r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """q_0 (B, D), unit norm."""
        return F.normalize(v_r + t + self.fusion(torch.cat([v_r, t], -1)), dim=-1)

    def step(self, q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """One accumulation step q_{k−1} → q_k."""
        return F.normalize(q + self.accumulator(torch.cat([q, s], -1)), dim=-1)

    def forward(self, v_r: torch.Tensor, t: torch.Tensor, sents: torch.Tensor,
                n: torch.Tensor) -> torch.Tensor:
        """All states (B, K+1, D): [:, k] = q_k, and q_{n_b} repeated for k > n_b.
        sents (B, K, D) is padded; n (B,) the sentence counts. Only the rows still accumulating
        at step k are computed (a batch of short edits with one long one costs one long row)."""
        q = self.start(v_r, t)
        states = [q]
        every = int(n.min()) if len(n) else 0  # steps every row takes: no row selection needed
        for k in range(sents.shape[1]):
            if k < every:
                q = self.step(q, sents[:, k])
                states.append(q)
                continue
            rows = (n > k).nonzero().squeeze(1)
            if len(rows) == 0:
                states += [q] * (sents.shape[1] - k)
                break
            q = q.index_copy(0, rows, self.step(q[rows], sents[rows, k]))
            states.append(q)
        return torch.stack(states, 1)


def step_counts(n: np.ndarray | Sequence[int], arch: PACEConfig) -> np.ndarray:
    """Accumulator steps per text from its sentence counts: one per sentence, except a single
    sentence under `short_direct` (zero steps: q_0 is the query)."""
    n = np.asarray(n, np.int64)
    return np.where(n == 1, 0, n) if arch.short_direct else n


def as_progression(states: list[np.ndarray]) -> list[np.ndarray]:
    """The query after each sentence from [q_0, ..., q_n]: q_1..q_n, or [q_0] for a text that
    took no step (one sentence under `short_direct`: q_0 read it)."""
    return states[1:] or states[:1]


def final_state(states: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """q_n per row of (B, K+1, D) states."""
    return states[torch.arange(len(n), device=states.device), n]


@register_method
class PACE(TrainedMethod):
    name = "pace"
    label = "PACE"
    description = "coarse fusion q_0, then one shared accumulator step per sentence (PACE)"
    app_role = "column"
    native_progression = True
    config_cls = PACEConfig

    @classmethod
    def build_module(cls, dim: int, arch: PACEConfig) -> nn.Module:
        return PACENet(dim, arch)

    @torch.no_grad()
    def _states(self, ref: np.ndarray, texts: list[str],
                sentences: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        n = [len(s) for s in sentences]
        flat = [s for ss in sentences for s in ss]
        steps = step_counts(n, self.arch)
        z_t = self.encode_texts(texts)
        z_s = self.encode_texts(flat)
        dim = self.backbone.dim
        pad = np.zeros((len(texts), max(n, default=0), dim), np.float32)
        off = 0
        for i, k in enumerate(n):
            pad[i, :k] = z_s[off:off + k]
            off += k
        n_t = torch.as_tensor(steps, device=self._tensor(ref[:1]).device)
        return self.module(self._tensor(ref), self._tensor(z_t), self._tensor(pad), n_t).float(), n_t

    def _compose(self, refs: Refs, texts: list[str]) -> np.ndarray:
        ref, out = refs.emb, []
        for i in range(0, len(texts), 2048):
            chunk = texts[i:i + 2048]
            states, n = self._states(ref[i:i + 2048], chunk, [split_sentences(t) for t in chunk])
            out.append(final_state(states, n).cpu().numpy())
        return np.concatenate(out)

    def steps(self, ref: RefInput, text: str) -> list[np.ndarray]:
        """[q_0, q_1, …, q_n] for one reference (D,) and one edit text: (D,) unit vectors."""
        return self._run_steps(ref, text, split_sentences(text))

    def compose_with_steps(self, ref: RefInput, text: str,
                           sentences: Sequence[str]) -> tuple[np.ndarray, list[np.ndarray]]:
        """q and the progression from one run of the accumulator when the progression covers every
        sentence of the text (q is then its last state); else as the base class."""
        if [s for s in sentences if s.strip()] != split_sentences(text):
            return super().compose_with_steps(ref, text, sentences)
        steps = self.steps(ref, text)  # [q_0, ..., q_n]
        return steps[-1][None].astype(np.float32), as_progression(steps)

    def progression(self, ref: RefInput, sentences: Sequence[str]) -> list[np.ndarray]:
        """[q_1, …, q_n]: the query after each sentence (q_0 sees the sentences joined)."""
        sentences = [s for s in sentences if s.strip()]
        return as_progression(self._run_steps(ref, " ".join(sentences), sentences)) if sentences else []

    def _run_steps(self, ref: RefInput, text: str, sentences: list[str]) -> list[np.ndarray]:
        ref = self._check_ref(ref).emb[:1]
        states, n = self._states(ref, [text], [list(sentences)])
        return list(states[0, :int(n[0]) + 1].cpu().numpy())
