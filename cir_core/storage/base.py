"""The storage layer's shared pieces: the error family, `Revision`, the `Store` protocol."""
from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Mapping, Protocol, Sequence

from ..errors import CIRError


class StorageError(CIRError):
    """A repo could not be pushed, fetched or trusted; the message names the repo."""


class NotFound(StorageError):
    """The repo, the revision or the file does not exist (or is private and no token was given)."""


class Unreachable(StorageError):
    """The store could not be asked (no network, HF_HUB_OFFLINE, a 5xx): a cache may still help."""


class NotCached(StorageError):
    """Asked for cached files only, and the cache has no snapshot of that revision."""


@dataclass(frozen=True)
class Revision:
    """A downloaded (or cached) revision: its folder and the full commit sha it resolved to."""

    path: Path
    commit: str


class Store(Protocol):
    """Trees by revision (`cir_core.hub`) and single files on a branch (`db.snapshot`)."""

    name: str

    def describe(self, repo_id: str) -> str:
        """Where `repo_id` is, for log lines and errors."""

    def upload_folder(self, repo_id: str, folder: Path, *, repo_type: str, branch: str,
                      message: str) -> str:
        """Make `branch` hold exactly the files of `folder` (creating repo and branch if needed);
        returns the new commit's sha."""

    def create_tag(self, repo_id: str, tag: str, commit: str, *, repo_type: str) -> None:
        """Point `tag` at `commit`."""

    def snapshot_download(self, repo_id: str, *, repo_type: str, revision: str | None,
                          allow_patterns: Sequence[str] | None, local_files_only: bool) -> Revision:
        """The files of `revision` (branch, tag or sha; None: main) matching `allow_patterns`."""

    def fetch_file(self, repo_id: str, path: str, *, repo_type: str, revision: str | None,
                   local_files_only: bool) -> Revision:
        """One file of `revision` (branch, tag or sha; None: main), without listing the repo:
        the snapshot folder holding it (`Revision.path / path`) and the commit it resolved to."""

    def commit(self, repo_id: str, adds: Mapping[str, Path], deletes: Sequence[str], *, repo_type: str,
               message: str) -> None:
        """Add/replace `adds` (repo path -> local file) and delete `deletes` on main, as ONE change
        (a failed commit changes nothing); the repo is created (private) if it does not exist."""

    def list_files(self, repo_id: str, *, repo_type: str, prefix: str = "") -> list[str]:
        """Paths on main starting with `prefix` ([] for an empty or not-yet-created repo)."""

    def download(self, repo_id: str, path: str, *, repo_type: str) -> Path:
        """A local, readable copy of the file at `path` on main."""


def matches(path: str, patterns: Sequence[str] | None) -> bool:
    """`huggingface_hub`'s rule: no patterns means everything; `*` also crosses '/'."""
    return patterns is None or any(fnmatch(path, p) for p in patterns)


def is_plain_path(path: str) -> bool:
    """A plain relative POSIX path inside a repo: no '..' or '.' part, no root, no backslash."""
    return (bool(path) and "\\" not in path and not path.startswith("/")
            and all(p not in ("", ".", "..") for p in path.split("/")))
