"""CIReVL's Chord λ, chosen on val like every trained method's (`ValBench.select_lambda`, the
trainers' rule), for the training-free method as configured (`CIR_CIREVL_*`: on the world the
training-caption bank and the rules rewriter); written to `assets/cirevl-lambda.json`
with the backbone it was chosen on, the configuration, the curve and the val scores. CIReVL reads
it when its backbone and configuration match (else it keeps the default λ and says so).

    python -m training.cirevl_lambda [--backbone local-dir:assets/backbone/cir-tiny-vit] [--val world]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from cir_core.config import git_commit
from cir_core.encoder import Encoder
from cir_core.fileio import atomic_write
from cir_core.methods.cirevl import LAMBDA_FILE
from cir_core.settings import add_backbone_args

from .heads import LAMBDA_GRID, LAMBDA_MAX, ValBench
from .registry import Trainer, register_trainer

register_trainer(Trainer("cirevl-lambda", "training.cirevl_lambda", None, None, smoke=False, stage=3))


def choose(backbone: Encoder, val: ValBench, lambda_max: float = LAMBDA_MAX) -> dict:
    """The record: λ, its search on val, the val scores at it, what it was chosen for."""
    from cir_core.methods import create_method

    m = create_method("cirevl", backbone)
    lam, search = val.select_lambda(m, LAMBDA_GRID, lambda_max)
    m.chord_lambda = lam
    return {"method": "cirevl", "backbone": backbone.id, "config": m.config_key(), "chord_lambda": lam,
            "lambda_search": search, "metrics": val.report(m), "on": time.strftime("%Y-%m-%d"),
            "git_commit": git_commit(), "by": "python -m training.cirevl_lambda"}


def main(argv: list[str] | None = None) -> dict:
    from cir_core.backbone import load_backbone
    from cir_core.paths import DEFAULT_BACKBONE

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_backbone_args(ap, default=DEFAULT_BACKBONE)
    ap.add_argument("--val", default="world", help="world, or a real benchmark's val split (cirr:ROOT, ...)")
    ap.add_argument("--val-queries", type=int, default=500)
    ap.add_argument("--lambda-max", type=float, default=LAMBDA_MAX)
    ap.add_argument("--out", type=Path, default=LAMBDA_FILE)
    a = ap.parse_args(argv)
    backbone = load_backbone(a.backbone, a.pretrained)
    rec = choose(backbone, ValBench(backbone, a.val_queries, spec=a.val), a.lambda_max)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(a.out, lambda f: f.write(json.dumps(rec, indent=1) + "\n"), binary=False)
    print(json.dumps({k: rec[k] for k in ("chord_lambda", "backbone")} | {"at_edge": rec["lambda_search"]["at_edge"],
                                                                         "wrote": str(a.out)}))
    return rec


if __name__ == "__main__":
    main()
