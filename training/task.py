"""What every trainer of a registered method shares on the one loop (`loop.run`): its settings
for validation, the Chord λ search and the export (`MethodSettings`), the `MethodTask` base that
validates, chooses λ on val (`ValBench.select_lambda` over `lambda_grid`, on past it up to
`lambda_max` while the best is the grid's edge) and writes the checkpoint through `Method.save`,
and the command line (`cli`). The test split is never touched.

A trainer supplies its model, batches and loss (the loop's `TrainTask`) and `eval_method()`: the
registered method holding the weights being trained, as the export would save them now.
`CachedHeadTask` is that for the trainers on the frozen-embedding cache (DiCE, PACE and the
zero-shot peers): an EMA-wrapped net whose averaged weights an evaluation copy of the method
receives.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import torch

from cir_core.encoder import Towers

from .heads import LAMBDA_GRID, LAMBDA_MAX, EMAWrapper, ValBench, param_groups
from .loop import LoopConfig, parse_cli, run, saved_step

if TYPE_CHECKING:
    from .embed_cache import TrainEmbeddings


@dataclass
class MethodSettings(LoopConfig):
    """The loop's settings plus what every method trainer reads its backbone and data from and
    validates and exports with."""

    backbone: str = "local-dir:assets/backbone/cir-tiny-vit"
    pretrained: str | None = None
    data: str = "world"  # world + films (world:films=F another share), or itt:FILE, cirr:ROOT, fashioniq:ROOT, lcirr:ROOT (training/triplets.py)
    image_root: str | None = None  # itt: where its image paths start (default: the file's folder)
    n_train: int = 20000  # the world's first n queries; a real source's first n triplets
    data_seed: int = 0
    render_workers: int = 0  # world: render processes; real data: image-decoding processes
    cache_root: str | None = None
    batch_size: int = 512
    val: str = "world"  # the λ / validation split: the world's val, or a real benchmark (cirr:ROOT, ...)
    val_queries: int = 500  # world: val queries (0 with val=world: no validation, λ stays the default)
    val_cache_root: str | None = None
    lambda_grid: list = field(default_factory=lambda: list(LAMBDA_GRID))
    lambda_max: float = LAMBDA_MAX  # the λ search goes past the grid up to this while the best is its edge
    export_dir: str | None = None  # default: `default_export(out_dir)`


class MethodTask:
    """The export half of a `TrainTask` that trains a registered method. Subclasses set `cfg`
    and `backbone` and implement `eval_method`; the hooks below default to what most use."""

    cfg: MethodSettings
    backbone: Towers  # load_backbone's, or the one a caller passed
    _val: ValBench | None = None
    _val_built = False

    # -- what a trainer provides -----------------------------------------------------------------
    def eval_method(self) -> Any:
        """The registered method holding the current (EMA) weights, in eval mode."""
        raise NotImplementedError

    def export_method(self) -> Any:
        """The method the export saves (default: `eval_method()`; LinCIR's keeps its best)."""
        return self.eval_method()

    def record(self, metrics: dict[str, float]) -> dict[str, Any]:
        """What the checkpoint's `metrics` record besides the final val scores (the loop's last
        validation by default; trainers add their training losses)."""
        return dict(metrics)

    def final_metrics(self, method: Any) -> dict[str, Any]:
        """The val scores of the exported method at its chosen λ."""
        return self.val.report(method) if self.val is not None else {}

    def checkpoint_extra(self) -> dict[str, Any]:
        """Entries of the checkpoint's `extra` the trainer adds (PACT: its objective)."""
        return {}

    def total_steps(self) -> int:
        """The steps a finished run has taken (a run stopped before them exports nothing)."""
        return int(self.cfg.steps)

    def default_export(self, out_dir: Path) -> Path:
        return Path(out_dir) / "export"

    # -- what the base does ----------------------------------------------------------------------
    @property
    def val(self) -> ValBench | None:
        """The val split, built on first use: the world's (`val_queries`) or a real benchmark's
        (`val=cirr:ROOT`, ...); None when `val_queries` is 0 on the world."""
        if not self._val_built:
            cfg = self.cfg
            if cfg.val_queries or cfg.val != "world":
                root = Path(cfg.val_cache_root) if cfg.val_cache_root else None
                self._val = ValBench(self.backbone, cfg.val_queries, root, spec=cfg.val)
            self._val_built = True
        return self._val

    def validate(self) -> dict[str, float]:
        """The periodic validation line (`ValBench.report`); {} without a val split."""
        return {} if self.val is None else self.val.report(self.eval_method())

    def export(self, out_dir: Path, metrics: dict[str, float]) -> None:
        """Choose Chord λ on val, then write the checkpoint to `export_dir` (default
        `default_export(out_dir)`). A run stopped early (max_minutes, or `steps` below the
        recipe's) exports nothing: a partial model must not replace a shipped checkpoint. Resume
        it to finish."""
        done, total = saved_step(Path(out_dir)), self.total_steps()
        if done < total:
            print(f"stopped at step {done} of {total}: not exported (run again to resume)")
            return
        m = self.export_method()
        out, search = self.record(metrics), None
        if self.val is not None:
            lam, search = self.val.select_lambda(m, [float(v) for v in self.cfg.lambda_grid], self.cfg.lambda_max)
            m.chord_lambda = lam
            out.update(self.final_metrics(m))
        dest = Path(self.cfg.export_dir or self.default_export(out_dir))
        m.save(dest, out, training=self.cfg.to_dict(), lambda_search=search, **self.checkpoint_extra())
        print(json.dumps({"exported": str(dest), "chord_lambda": m.chord_lambda, **out}, default=str))


def cli(task_cls: Callable[[Any], Any], defaults: MethodSettings, argv: list[str] | None, doc: str | None,
        prepare: Callable[[Any, Any], None] | None = None) -> dict:
    """Every method trainer's command line (`loop.parse_cli`: `--config`, `--no-resume`,
    key=value): `prepare(cfg, args)` may adjust the settings, then `run(task_cls(cfg), cfg)`."""
    cfg, resume, args = parse_cli(defaults, argv, doc)
    if prepare is not None:
        prepare(cfg, args)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)  # before the task builds its caches / encodes anything
    return run(task_cls(cfg), cfg, resume=resume)


# -- trainers on the frozen-embedding cache (DiCE, PACE, the zero-shot peers) -----------------------
@dataclass
class HeadSettings(MethodSettings):
    """What the trainers on the embedding cache are configured by, besides their own losses and
    architecture: where the backbone runs and the EMA of the weights."""

    backbone_device: str | None = None  # default: cuda when available
    ema: float = 0.9995


class CachedHeadTask(MethodTask):
    """An EMA-wrapped net (`self.model`) trained on the embed cache; `self.evaluated`, a copy of
    the registered method, receives the averaged weights for validation and export."""

    cfg: HeadSettings
    model: EMAWrapper
    evaluated: Any

    def setup(self, cfg: HeadSettings, backbone: Towers | None) -> None:
        """Backbone, train cache and val split (before the subclass builds its net: a bad val
        spec fails before any training)."""
        self.cfg = cfg
        self.backbone, self.cache = load_inputs(cfg, backbone)
        self.val  # noqa: B018  (built now)
        self.last_logs: dict[str, float] = {}  # the final step's losses go into config.json

    def param_groups(self, cfg: LoopConfig) -> list[dict]:
        return param_groups(self.model.net, cfg.weight_decay)

    def before_step(self, step: int, optimizer: Any) -> None:
        if step > 0:  # the weights after `step` updates (the last update is folded in at export)
            self.model.update()

    def eval_method(self) -> Any:
        weights = self.evaluated.weights()
        weights.load_state_dict(self.model.averaged_state())
        weights.eval()
        return self.evaluated

    def record(self, metrics: dict[str, float]) -> dict[str, Any]:
        return {**metrics, **{f"train_{k}": round(v, 4) for k, v in self.last_logs.items()},
                "train_queries": len(self.cache), "train_cache": self.cache.folder.name}


def load_inputs(cfg: HeadSettings, backbone: Towers | None = None) -> tuple[Towers, TrainEmbeddings]:
    """(backbone, train cache) from a head's settings (`backbone` given: reuse it)."""
    from cir_core.backbone import load_backbone

    from .train_data import load_train_cache

    if backbone is None:
        dev = cfg.backbone_device or ("cuda" if torch.cuda.is_available() else "cpu")
        backbone = load_backbone(cfg.backbone, cfg.pretrained, device=dev)
    root = Path(cfg.cache_root) if cfg.cache_root else None
    cache = load_train_cache(backbone, cfg.n_train, cfg.data_seed, root, data=cfg.data,
                             image_root=cfg.image_root, workers=cfg.render_workers)
    return backbone, cache
