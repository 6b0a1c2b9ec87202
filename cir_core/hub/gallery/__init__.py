"""A gallery on the Hugging Face Hub: `push gallery` publishes a folder of frames with thumbnails
and prebuilt embeddings as a dataset repo (`layout.py`, `push.py`); `--gallery hf:org/name@rev`
opens it (`pull.py`): thumbnails and index at start-up, full frames when opened."""
from __future__ import annotations

from .layout import FORMAT, backbone_slug, check_gallery_layout
from .pull import PREFIX, HubGallery, is_hub_gallery, open_hub_gallery
from .push import push_gallery, stage

__all__ = ["FORMAT", "PREFIX", "HubGallery", "backbone_slug", "check_gallery_layout", "is_hub_gallery", "open_hub_gallery",
           "push_gallery", "stage"]
