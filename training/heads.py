"""Pieces the method trainers share: an EMA of the weights, AdamW's parameter groups, the
loop's per-step numpy generator, and `ValBench`, the val split that every trainer validates on
and chooses Chord λ on (`training.task.MethodTask` calls it). The test split is never touched.
"""
from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from cir_core.encoder import Encoder
from cir_core.search import DEFAULT_LAMBDA, ScoreOpts

LAMBDA_GRID = (0.02, 0.05, 0.08, 0.12, 0.16, 0.2, 0.25, 0.34, 0.45, 0.6, 0.8, 1.0)
# Where the best λ is the grid's largest, the search goes on through these (up to `lambda_max`)
# until the curve stops rising: a λ chosen on the grid's edge would be the grid's, not the method's.
LAMBDA_BEYOND = (1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0)
LAMBDA_MAX = 64.0
REPORTED = ("R@1", "R@5", "R@10", "R@50", "Rs@1", "mAP@10", "identity@1", "edit@1")


class EMAWrapper(nn.Module):
    """The trained net plus an exponential moving average of its weights.

    The average starts at zero and is bias-corrected (divided by 1 − decay^t, as Adam's moments),
    so it never mixes in the random initialisation; with the paper's 0.9995 over 20k steps the
    correction is e^−10, i.e. nothing. It lives in this module's state dict, so the loop's
    checkpoints resume it exactly. decay = 0 disables it (the "w/o EMA" ablation)."""

    def __init__(self, net: nn.Module, decay: float):
        super().__init__()
        self.net, self.decay = net, float(decay)
        if self.decay > 0:
            self.ema = copy.deepcopy(net).requires_grad_(False)
            for p in self.ema.parameters():
                p.zero_()
        self.register_buffer("ema_count", torch.zeros((), dtype=torch.long))

    def forward(self, *args: Any, **kw: Any) -> Any:
        return self.net(*args, **kw)

    @torch.no_grad()
    def update(self) -> None:
        """Fold the current weights into the average (call once per optimizer step)."""
        if self.decay > 0:
            for e, p in zip(self.ema.parameters(), self.net.parameters()):
                e.mul_(self.decay).add_(p.detach().float(), alpha=1 - self.decay)
            self.ema_count += 1

    @torch.no_grad()
    def averaged_state(self) -> dict[str, torch.Tensor]:
        """The net's state dict with EMA weights, the current weights folded in (no mutation)."""
        state = {k: v.detach().clone() for k, v in self.net.state_dict().items()}
        if self.decay <= 0:
            return state
        t = int(self.ema_count) + 1
        names = [n for n, _ in self.net.named_parameters()]
        for n, e, p in zip(names, self.ema.parameters(), self.net.parameters()):
            state[n] = (self.decay * e + (1 - self.decay) * p.float()) / (1 - self.decay ** t)
        return state


def param_groups(net: nn.Module, weight_decay: float) -> list[dict]:
    """Weight decay on matrices only, not on biases and LayerNorm gains (the usual AdamW split)."""
    decay = [p for p in net.parameters() if p.requires_grad and p.ndim >= 2]
    rest = [p for p in net.parameters() if p.requires_grad and p.ndim < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def np_rng(rng: random.Random) -> np.random.Generator:
    """A numpy generator drawn from the loop's per-step `random.Random` (resumable batches)."""
    return np.random.default_rng(rng.getrandbits(64))


# λ's criterion: the first reported ("world+films R@10": the mean of the world's and the films' val R@10)
CRITERIA = ("world+films R@10", "R@10", "avg R@10", "mAP@10", "mean R@1", "R@5", "R@1")
FILM_REPORTED = ("R@1", "R@10", "identity@1")  # of the film val split, in the validation line


def val_films(n: int) -> int:
    """Val films for `n` val queries: the film val split's 24 at 500 queries, in proportion below."""
    return max(2, min(24, round(24 * n / 500)))


class ValBench:
    """A labelled validation split, scored by its benchmark's own code, the evaluation loop's
    (`cir_core.eval.loop`: queries composed once, scored per option): the generated world's val
    splits (`spec="world"`, the default: the world's `n` queries and the films' `n` over
    `val_films(n)` films, λ chosen on the mean of their R@10; `"films"`: the films' alone) or a
    real one (`spec="cirr:ROOT"`, `lcirr:ROOT`, `fashioniq:ROOT`, `circo:ROOT`, ...); gallery embeddings cached on disk. The test split is never touched."""

    def __init__(self, backbone: Encoder, n: int, cache_root: Path | None = None, progress: bool = False,
                 spec: str = "world"):
        from cir_core.benchmarks import load_benchmark
        from cir_core.eval.loop import embed_benchmark

        name, _, root = spec.partition(":")
        generated = name in ("world", "films")
        films = {"n_films": val_films(n)} if name == "films" else {}
        self.bench = (load_benchmark(name, split="val", n_queries=n, image_size=backbone.image_size, **films)
                      if generated else load_benchmark(name, root, "val"))
        self.films = ValBench(backbone, n, cache_root, progress, "films") if name == "world" else None
        self.data = embed_benchmark(self.bench, backbone, cache_root, progress)
        self.n_queries = self.bench.n_queries()

    def queries(self, method) -> Any:
        """The method's val queries composed once (a λ sweep scores them again and again; with
        the films, a pair)."""
        c = self.bench.compose(method, self.data)
        return c if self.films is None else (c, self.films.queries(method))

    def metrics(self, method, composed: Any, lam: float | None) -> tuple[dict, dict]:
        """(metrics, R@10 per edit type on the world) for cosine (lam None) or Chord(lam); with
        the films, theirs prefixed "films_" and the criterion "world+films R@10" beside."""
        if self.films is not None:
            m, types = self.metrics_of(method, composed[0], lam)
            fm, ftypes = self.films.metrics(method, composed[1], lam)
            m.update({f"films_{k}": v for k, v in fm.items()})
            types.update({f"films_{k}": v for k, v in ftypes.items()})
            m["world+films R@10"] = round((m["R@10"] + fm["R@10"]) / 2, 4)
            return m, types
        return self.metrics_of(method, composed, lam)

    def metrics_of(self, method, composed: Any, lam: float | None) -> tuple[dict, dict]:
        """`metrics` of this split alone."""
        opts = ScoreOpts("cosine") if lam is None else ScoreOpts("chord", lam)
        res = self.bench.score(method, composed, self.data, opts)
        return {k: round(float(v), 4) for k, v in res.metrics.items()}, res.extra.get("breakdown", {})

    def criterion(self, metrics: dict) -> str:
        found = [c for c in CRITERIA if c in metrics]
        if not found:
            raise SystemExit(f"validation benchmark {self.bench.name} reports none of {CRITERIA}: {list(metrics)}")
        return found[0]

    def report(self, method, lam: float | None = None) -> dict[str, float]:
        """The periodic validation line: cosine metrics, R@10 per type, Chord(λ) at the criterion."""
        c = self.queries(method)
        cos, by_type = self.metrics(method, c, None)
        chord, _ = self.metrics(method, c, method.chord_lambda if lam is None else lam)
        key = self.criterion(cos)
        films = {f"val_films_{k}": cos[f"films_{k}"] for k in FILM_REPORTED if f"films_{k}" in cos}
        return {**{f"val_{k}": cos[k] for k in REPORTED if k in cos}, **films,
                **{f"val_{k}": v for k, v in by_type.items()},
                **({"val_chord_R@1": chord["R@1"]} if "R@1" in chord else {}), f"val_chord_{key}": chord[key]}

    def select_lambda(self, method, grid: Sequence[float] = LAMBDA_GRID,
                      lambda_max: float = LAMBDA_MAX) -> tuple[float, dict]:
        """Chord λ with the best val R@10 (or the benchmark's nearest criterion; ties: higher R@1,
        then closer to DEFAULT_LAMBDA); PACT Table 14. While the best is the largest λ tried, the
        search continues through `LAMBDA_BEYOND` up to `lambda_max`; `at_edge` in the record says
        the best is still the largest tried (the curve had not stopped rising at the bound)."""
        c = self.queries(method)
        table = {float(l): self.metrics(method, c, float(l))[0] for l in grid}
        key = self.criterion(next(iter(table.values())))
        rank = lambda l: (table[l][key], table[l].get("R@1", 0.0), -abs(l - DEFAULT_LAMBDA))  # noqa: E731
        best = max(table, key=rank)
        for more in (x for x in LAMBDA_BEYOND if max(grid) < x <= lambda_max):
            if best != max(table):
                break  # the curve stopped rising inside what was tried
            table[more] = self.metrics(method, c, more)[0]
            best = max(table, key=rank)
        return best, {"split": "val", "benchmark": self.bench.name, "n_queries": self.n_queries, "criterion": key,
                      key: {f"{l:g}": table[l][key] for l in table},
                      **({"R@1": {f"{l:g}": table[l]["R@1"] for l in table}} if "R@1" in table[best] else {}),
                      "at_edge": best == max(table), "lambda_max": float(lambda_max)}
