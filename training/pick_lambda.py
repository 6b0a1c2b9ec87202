"""Choose a trained checkpoint's Chord λ again on val, with the trainers' own rule
(`ValBench.select_lambda`: the grid, then past it while the best is its edge), and record it in
the checkpoint's config.json (the weights are not touched).

    python -m training.pick_lambda assets/methods/searle assets/methods/lincir [--val world]
        [--val-queries N] [--lambda-max 64] [--backbone local-dir:assets/backbone/cir-tiny-vit]

For a checkpoint whose λ was chosen on a grid that stopped too early (SEARLE and LinCIR picked
1.0, the old grid's largest value, with val R@10 still rising). The record keeps the previous λ.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from cir_core.checkpoint import read_checkpoint
from cir_core.encoder import Encoder
from cir_core.settings import add_backbone_args

from .heads import LAMBDA_GRID, LAMBDA_MAX, ValBench


def repick(folder: Path, val: ValBench, backbone: Encoder, lambda_max: float, grid=LAMBDA_GRID) -> dict:
    """Re-choose `folder`'s λ on `val`; rewrite its config.json (atomically, in the current
    format); the new config."""
    from cir_core.methods import create_method

    ck = read_checkpoint(folder)
    method = create_method(ck.method, backbone, folder)
    old = method.chord_lambda
    lam, search = val.select_lambda(method, grid, lambda_max)
    method.chord_lambda = lam
    ck.metrics.update({k: v for k, v in val.report(method).items() if k.startswith("val_chord_")})
    ck.chord_lambda, ck.lambda_search = lam, search
    ck.lambda_repicked = {"previous": old, "on": time.strftime("%Y-%m-%d"), "by": "python -m training.pick_lambda",
                          "lambda_max": lambda_max}
    ck.write(folder)
    return ck.to_json()


def main(argv: list[str] | None = None) -> list[dict]:
    from cir_core.backbone import load_backbone
    from cir_core.paths import DEFAULT_BACKBONE

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoints", nargs="+", type=Path, help="method checkpoint folders")
    add_backbone_args(ap, default=DEFAULT_BACKBONE)
    ap.add_argument("--val", default="world", help="world, or a real benchmark's val split (cirr:ROOT, ...)")
    ap.add_argument("--val-queries", type=int, default=500, help="world: val queries (the trainers' 500)")
    ap.add_argument("--lambda-max", type=float, default=LAMBDA_MAX)
    a = ap.parse_args(argv)
    backbone = load_backbone(a.backbone, a.pretrained)
    val = ValBench(backbone, a.val_queries, spec=a.val)
    out = []
    for folder in a.checkpoints:
        cfg = repick(folder, val, backbone, a.lambda_max)
        search = cfg["lambda_search"]
        print(json.dumps({"checkpoint": str(folder), "previous": cfg["lambda_repicked"]["previous"],
                          "chord_lambda": cfg["chord_lambda"], "at_edge": search["at_edge"],
                          search["criterion"]: search[search["criterion"]]}))
        out.append(cfg)
    return out


if __name__ == "__main__":
    main()
