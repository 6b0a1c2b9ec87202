"""Ship the app's default gallery embeddings with the assets, so a clean clone's first
`python app.py` encodes nothing.

    python -m training.ship_gallery [--backbone local-dir:assets/backbone/cir-tiny-vit] [--world-queries 1000]

Embeds the app's default world gallery (its test split with the README's demo queries) with the
shipped backbone and writes `assets/embeddings/<gallery>.npz` (float16 rows keyed by item
fingerprints, with the backbone's id). The app reads it only where the backbone and every
fingerprint match (`cir_core.gallery.read_shipped`); anything else is encoded as usual. Run it
after every backbone rebuild (`build_assets` does, right after the backbone).
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from cir_core.config import ASSETS_DIR
from cir_core.gallery import EmbeddingCache, shipped_name, write_shipped

from .registry import Trainer, register_trainer

register_trainer(Trainer("gallery-embeddings", "training.ship_gallery", stage=1))
SHIPPED = ASSETS_DIR / "embeddings"


def main(argv: list[str] | None = None) -> Path:
    from cir_core.backbone import DEFAULT_MODEL, load_backbone
    from cir_core.engine.core import open_gallery

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backbone", default=DEFAULT_MODEL)
    ap.add_argument("--world-queries", type=int, default=1000, help="the app's default (--world-queries)")
    ap.add_argument("--out", type=Path, default=SHIPPED)
    a = ap.parse_args(argv)
    backbone = load_backbone(a.backbone)
    gallery, _ = open_gallery("world", a.world_queries, backbone.image_size)
    with tempfile.TemporaryDirectory() as tmp:  # a fresh encode, never an older cache's rows
        emb = EmbeddingCache(tmp).embed(gallery, backbone, progress=True)
    keys = [gallery.fingerprint(i) for i in range(len(gallery))]
    path = write_shipped(a.out / shipped_name(gallery), keys, emb, backbone)
    print(f"wrote {path} ({len(keys)} x {backbone.dim}, backbone {backbone.id})")
    return path


if __name__ == "__main__":
    main()
