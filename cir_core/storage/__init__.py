"""The project's one storage layer for "a Hub repo or a local folder": the Hugging Face Hub
(`HFStore`) or a plain folder that behaves like one (`FolderStore`: tests, air-gapped use, drills).

Both speak one small `Store` interface, shaped after `huggingface_hub`: whole trees
(`upload_folder`, `snapshot_download`, `create_tag`: checkpoints, backbones, embeddings through
`repo.py`: pull and push pinned to a revision, verified against a sha256 manifest,
`manifest.py`) and single files (`commit` of adds and deletes as one change, `list_files`,
`download`: the annotation DB's snapshots, `db.snapshot`). They raise one error family —
`StorageError`, with `NotFound` (no such repo, revision or file), `Unreachable` (no network,
HF_HUB_OFFLINE, a server error: a cache may still help) and `NotCached` — so every caller decides
once what an unreachable Hub, a missing repo or an empty cache means.
"""
from __future__ import annotations

from pathlib import Path

from .base import NotCached, NotFound, Revision, StorageError, Store, Unreachable, is_plain_path, matches
from .folder import FolderStore
from .hf import HFStore

__all__ = ["StorageError", "NotFound", "Unreachable", "NotCached", "Revision", "Store", "HFStore",
           "FolderStore", "matches", "is_plain_path", "store_for"]


def store_for(spec: str, token: str | None = None) -> "Store":
    """`file:///abs/folder` -> a FolderStore there; anything else -> the Hub (HFStore)."""
    if spec.startswith("file://"):
        root = Path(spec[len("file://"):])
        return FolderStore(root, root / ".cache")
    return HFStore(token=token)
