"""What a world backbone sees: its held-out text→image retrieval and zero-shot attribute probes.

    python -m studies.probe_backbone [--backbone local-dir:DIR] [--val-scenes 1000]
                                     [--probe-scenes 200] [--films [--moves]] [--threads 1] [--json OUT]

The numbers are the backbone trainer's own validation (`training.backbone_val.evaluate` on its
held-out scenes, `training.backbone_val_films.film_probe` with `--films`), so a run on a trained
folder reproduces what its exported config records. `--moves` (with `--films`) adds how far each
probed change moves the keyframe's image embedding and its caption's (`attribute_moves`).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace

import numpy as np
import torch

from cir_core.report_header import write_report
from cir_core.settings import add_backbone_args
from training.backbone_val import Encoder, evaluate
from training.backbone_val_films import FILM_PROBES, alternatives, film_probe, probe_caption, probe_frames


def attribute_moves(enc: Encoder, image_size: int, probe_n: int = 200, n: int = 600,
                    max_alts: int = 3) -> dict[str, float]:
    """Per probe, how far its one-thing change moves the keyframe's image embedding and its
    caption's (mean cosine distance to at most `max_alts` alternatives), on the same frames as
    `film_probe`. A probe that fails with both moves as large as a probe that passes has its
    directions in the two towers unaligned rather than missing."""
    moves: dict[str, list[tuple[float, float]]] = {p: [] for p in FILM_PROBES}
    for i, k in enumerate(probe_frames(n)[:probe_n]):
        for name, alts in alternatives(k.state).items():
            if not alts:
                continue
            states = [k.state] + alts[:max_alts]
            img = enc.images([replace(k, state=x).image(image_size) for x in states])
            txt = enc.texts([probe_caption(x, i) for x in states])
            moves[name].append((1 - float((img[1:] @ img[0]).mean()), 1 - float((txt[1:] @ txt[0]).mean())))
    out = {}
    for name, v in moves.items():
        if v:
            out[f"films_move_image_{name}"] = round(float(np.mean([a for a, _ in v])), 4)
            out[f"films_move_text_{name}"] = round(float(np.mean([b for _, b in v])), 4)
    return out


def main(argv: list[str] | None = None) -> dict[str, float]:
    from cir_core.backbone import DEFAULT_MODEL, load_backbone

    ap = argparse.ArgumentParser(prog="python -m studies.probe_backbone", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_backbone_args(ap, default=DEFAULT_MODEL, pretrained=False)
    ap.add_argument("--val-scenes", type=int, default=1000)
    ap.add_argument("--probe-scenes", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (0: torch's default)")
    ap.add_argument("--films", action="store_true",
                    help="also probe film keyframes of the val films (training.backbone_val_films)")
    ap.add_argument("--moves", action="store_true",
                    help="with --films: how far each probe's change moves the image and the caption "
                         "embedding (attribute_moves)")
    ap.add_argument("--json", help="also write the metrics to this file")
    args = ap.parse_args(argv)
    if args.moves and not args.films:
        ap.error("--moves measures film probes: add --films")
    if args.threads:
        torch.set_num_threads(args.threads)
    bb = load_backbone(args.backbone)
    t0 = time.time()
    metrics = evaluate(bb.model, bb.tokenizer, bb.image_size, args.val_scenes, args.probe_scenes)
    if args.films:
        enc = Encoder(bb.model, bb.tokenizer, bb.image_size)
        metrics.update(film_probe(enc, bb.image_size))
        if args.moves:
            metrics.update(attribute_moves(enc, bb.image_size))
    out = {"backbone": bb.id, **metrics, "seconds": round(time.time() - t0, 1)}
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        write_report(args.json, out)
    return metrics


if __name__ == "__main__":
    sys.exit(main() and 0)
