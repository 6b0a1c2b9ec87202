"""Ship the app's default gallery embeddings and its world split with the assets, so a clean
clone's first `python app.py` encodes nothing and generates nothing.

    python -m training.ship_gallery [--backbone local-dir:assets/backbone/cir-tiny-vit] [--world-queries 1000]

Embeds the app's default world gallery (its test split with the README's demo queries) with the
shipped backbone and writes `assets/embeddings/<gallery>.npz` (float16 rows keyed by item
fingerprints, with the backbone's id). The app reads it only where the backbone and every
fingerprint match (`cir_core.gallery.read_shipped`); anything else is encoded as usual. The split
goes to `assets/world/` under a name hashing the world's code (`cir_core.world.store`), replacing
the older one. Run it after every backbone rebuild (`build_assets` does, right after the backbone)
and after a change to the world's generator (tests/test_world_store.py says when).
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from cir_core.gallery import EmbeddingCache, shipped_name, write_shipped
from cir_core.paths import SHIPPED_EMBEDDINGS
from cir_core.paths import SHIPPED_WORLD as SHIPPED_WORLD_DIR
from cir_core.settings import add_backbone_args

from .registry import Trainer, register_trainer

register_trainer(Trainer("gallery-embeddings", "training.ship_gallery", stage=1))
SHIPPED, SHIPPED_WORLD = SHIPPED_EMBEDDINGS, SHIPPED_WORLD_DIR


def main(argv: list[str] | None = None) -> Path:
    from cir_core.backbone import DEFAULT_MODEL, load_backbone
    from cir_core.engine.core import SHOWCASE
    from cir_core.world import build_benchmark, store

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_backbone_args(ap, default=DEFAULT_MODEL, pretrained=False)
    ap.add_argument("--world-queries", type=int, default=1000, help="the app's default (--world-queries)")
    ap.add_argument("--out", type=Path, default=SHIPPED)
    ap.add_argument("--out-world", type=Path, default=SHIPPED_WORLD)
    a = ap.parse_args(argv)
    backbone = load_backbone(a.backbone)
    bench = build_benchmark("test", a.world_queries, showcase=SHOWCASE)  # the app's: fresh, not read
    name = store.file_name("test", a.world_queries, SHOWCASE)
    for old in a.out_world.glob(f"world-test-{a.world_queries}-{SHOWCASE}-*.json.gz"):
        if old.name != name:
            old.unlink()
    print(f"wrote {store.write(bench, a.out_world / name)}")
    gallery = bench.gallery(backbone.image_size)
    with tempfile.TemporaryDirectory() as tmp:  # a fresh encode, never an older cache's rows
        emb, norms = EmbeddingCache(tmp).embed(gallery, backbone, progress=True, with_norms=True)
    keys = [gallery.fingerprint(i) for i in range(len(gallery))]
    path = write_shipped(a.out / shipped_name(gallery), keys, emb, norms, backbone)
    print(f"wrote {path} ({len(keys)} x {backbone.dim}, backbone {backbone.id})")
    return path


if __name__ == "__main__":
    main()
