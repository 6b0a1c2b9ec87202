"""Where snapshots are kept: a repo of the project's one storage layer (`cir_core.storage`), a Hub
dataset repo or a folder standing in for one (tests, offline drills).

A `Remote` stores files by repo path on the repo's main branch. `upload` applies adds and deletes
as ONE change (on the Hub one commit, in a folder one tree swapped in whole), so `latest.json`
never points at a snapshot that is not there and a failed push changes nothing. Failures are the
storage layer's: `NotFound` for a file (or repo) that does not exist, `Unreachable` for anything
else (network, auth, server), so callers can tell "nothing was ever pushed" from "could not look".
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from cir_core import env
from cir_core.storage import Store, store_for

from .core import SnapshotError

FOLDER_REPO = "local/annotations"  # the repo a `file:///dir` remote keeps its snapshots in


class Remote:
    """Storage for snapshots, addressed by repo-relative paths like `snapshots/<ts>.sqlite`."""

    def __init__(self, store: Store, repo_id: str, repo_type: str = "dataset") -> None:
        self.store, self.repo_id, self.repo_type = store, repo_id, repo_type

    def describe(self) -> str:
        """Human-readable location, for log lines and errors."""
        return self.store.describe(self.repo_id)

    def upload(self, adds: Mapping[str, Path], deletes: Sequence[str], message: str) -> None:
        """Add/replace `adds` (repo path -> local file) and delete `deletes`, all at once."""
        self.store.commit(self.repo_id, adds, deletes, repo_type=self.repo_type, message=message)

    def list_files(self, prefix: str) -> list[str]:
        """Repo paths starting with `prefix` ([] for an empty or not-yet-created repo)."""
        return self.store.list_files(self.repo_id, repo_type=self.repo_type, prefix=prefix)

    def download(self, path: str) -> Path:
        """A local, readable copy of the file at repo path `path` (treat it as read-only)."""
        return self.store.download(self.repo_id, path, repo_type=self.repo_type)


def folder_remote(root: str | Path) -> Remote:
    """A folder standing in for the Hub (`CIR_DB_REPO=file:///abs/path`)."""
    return remote_from_spec(f"file://{Path(root)}")


def remote_from_spec(spec: str, token: str | None = None) -> Remote:
    """`file:///abs/folder` -> a folder remote; `owner/name` -> that Hub dataset repo (created
    private on first push), with `token` or $HF_TOKEN."""
    if spec.startswith("file://"):
        return Remote(store_for(spec), FOLDER_REPO)
    if not spec or spec.count("/") != 1 or not all(spec.split("/")):
        raise SnapshotError(f"CIR_DB_REPO must look like 'owner/name', got {spec!r}")
    return Remote(store_for(spec, token if token is not None else env.read("HF_TOKEN")), spec)
