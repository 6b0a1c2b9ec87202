"""Where the project's files are: the checkout, the shipped assets, the cache. Imports only `env` of
the project, so any module (the settings, the registry, the engine) may read it."""
from __future__ import annotations

from pathlib import Path

from . import env

REPO_ROOT = Path(__file__).resolve().parent.parent
# A checkout keeps the shipped world in its top-level assets/; `pip install` puts it inside the
# package (setup.py maps it to cir_core/assets).
ASSETS_DIR = REPO_ROOT / "assets" if (REPO_ROOT / "assets").is_dir() else Path(__file__).resolve().parent / "assets"
DEFAULT_BACKBONE_DIR = ASSETS_DIR / "backbone" / "cir-tiny-vit"
DEFAULT_BACKBONE = f"local-dir:{DEFAULT_BACKBONE_DIR}"
DEFAULT_CHECKPOINTS = ASSETS_DIR / "methods"  # one <method>/ folder per shipped method
SHIPPED_EMBEDDINGS = ASSETS_DIR / "embeddings"  # the world gallery's embeddings (gallery.write_shipped)
SHIPPED_WORLD = ASSETS_DIR / "world"  # the app's world split (world.store)


def cache_dir() -> Path:
    """Where gallery embeddings (and other caches) live: $CIR_CACHE_DIR, else ~/.cache/cir-workbench."""
    return Path(env.read("CIR_CACHE_DIR") or Path.home() / ".cache" / "cir-workbench")
