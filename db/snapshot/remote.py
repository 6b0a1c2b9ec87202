"""Where snapshots are kept: a Hub dataset repo, or a local folder (tests, offline drills).

A `Remote` stores files by repo path. `upload` applies adds and deletes as ONE change (on the Hub,
one commit), so `latest.json` never points at a snapshot that is not there and a failed push
changes nothing. `download` raises RemoteMissingError for a file (or repo) that does not exist and
RemoteUnavailableError for anything else (network, auth, server), so callers can tell "nothing
was ever pushed" from "could not look".
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

from .core import RemoteMissingError, RemoteUnavailableError, SnapshotError


class Remote(Protocol):
    """Storage for snapshots, addressed by repo-relative paths like `snapshots/<ts>.sqlite`."""

    def upload(self, adds: Mapping[str, Path], deletes: Sequence[str], message: str) -> None:
        """Add/replace `adds` (repo path -> local file) and delete `deletes`, all at once."""

    def list_files(self, prefix: str) -> list[str]:
        """Repo paths starting with `prefix` ([] for an empty or not-yet-created repo)."""

    def download(self, path: str) -> Path:
        """A local, readable copy of the file at repo path `path`."""

    def describe(self) -> str:
        """Human-readable location, for log lines and errors."""


class FolderRemote:
    """A plain folder standing in for the Hub repo (`CIR_DB_REPO=file:///abs/path`)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def describe(self) -> str:
        return f"folder {self.root}"

    def upload(self, adds: Mapping[str, Path], deletes: Sequence[str], message: str) -> None:
        try:
            # The pointer goes last, so a crash mid-way never leaves it naming a missing file.
            for rel in sorted(adds, key=lambda p: p == "latest.json"):
                dst = self.root / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                tmp = dst.with_name(f".{dst.name}.part")
                shutil.copyfile(adds[rel], tmp)
                os.replace(tmp, dst)
            for rel in deletes:
                (self.root / rel).unlink(missing_ok=True)
        except OSError as e:
            raise RemoteUnavailableError(f"could not write to {self.describe()}: {e}") from e

    def list_files(self, prefix: str) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*")
                      if p.is_file() and not p.name.startswith(".")
                      and p.relative_to(self.root).as_posix().startswith(prefix))

    def download(self, path: str) -> Path:
        p = self.root / path
        if not p.is_file():
            raise RemoteMissingError(f"{path} not found in {self.describe()}")
        return p


class HubRemote:
    """A Hugging Face *dataset* repo (created private on first push if it does not exist).

    `api` and `download_fn` default to `huggingface_hub.HfApi()` and `hf_hub_download`; tests
    pass fakes so nothing touches the network.
    """

    def __init__(self, repo_id: str, token: str | None = None, api: Any = None,
                 download_fn: Callable[..., str] | None = None) -> None:
        if not repo_id or repo_id.count("/") != 1:
            raise SnapshotError(f"CIR_DB_REPO must look like 'owner/name', got {repo_id!r}")
        self.repo_id = repo_id
        self.token = token
        self._api = api
        self._download_fn = download_fn

    def describe(self) -> str:
        return f"dataset repo {self.repo_id}"

    def _check_online(self) -> None:
        from huggingface_hub import constants

        # huggingface_hub reads HF_HUB_OFFLINE once, at import; the app sets it when its settings
        # name no Hub model. Say so, rather than fail as a vague "cannot locate the file".
        if constants.HF_HUB_OFFLINE:
            raise RemoteUnavailableError(
                f"HF_HUB_OFFLINE is set, so {self.describe()} cannot be reached; unset it (before "
                f"huggingface_hub is imported) to persist the annotation DB")

    @property
    def api(self) -> Any:
        if self._api is None:
            from huggingface_hub import HfApi

            self._api = HfApi()
        return self._api

    def _translate(self, e: Exception, what: str) -> SnapshotError:
        from huggingface_hub import errors as hf

        # LocalEntryNotFoundError subclasses EntryNotFoundError but means "offline / could not
        # reach the Hub": it must not be mistaken for "the repo is empty".
        if isinstance(e, hf.LocalEntryNotFoundError):
            return RemoteUnavailableError(f"{what}: Hub unreachable or offline ({e})")
        if isinstance(e, hf.RepositoryNotFoundError):
            return RemoteMissingError(
                f"{what}: {self.describe()} not found or not accessible (check CIR_DB_REPO and "
                f"that HF_TOKEN can read it)")
        if isinstance(e, hf.EntryNotFoundError):
            return RemoteMissingError(f"{what}: not found in {self.describe()}")
        return RemoteUnavailableError(f"{what}: {type(e).__name__}: {e}")

    def upload(self, adds: Mapping[str, Path], deletes: Sequence[str], message: str) -> None:
        self._check_online()
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete

        ops: list[Any] = [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(local))
                          for rel, local in adds.items()]
        ops += [CommitOperationDelete(path_in_repo=rel) for rel in deletes]
        from huggingface_hub import errors as hf

        def commit() -> None:
            self.api.create_commit(self.repo_id, ops, commit_message=message,
                                   repo_type="dataset", token=self.token)

        try:
            try:
                commit()
            except hf.RepositoryNotFoundError:
                # Created only when missing (a fine-grained token may write to a repo yet not be
                # allowed to create one). Annotations are personal data: the new repo is private.
                self.api.create_repo(self.repo_id, repo_type="dataset", private=True,
                                     exist_ok=True, token=self.token)
                commit()
        except Exception as e:  # noqa: BLE001 - every Hub failure becomes one clear error type
            raise RemoteUnavailableError(f"push to {self.describe()} failed: {e}") from e

    def list_files(self, prefix: str) -> list[str]:
        self._check_online()
        from huggingface_hub import errors as hf

        try:
            files = self.api.list_repo_files(self.repo_id, repo_type="dataset", token=self.token)
        except hf.RepositoryNotFoundError:
            return []
        except Exception as e:  # noqa: BLE001
            raise self._translate(e, f"listing {self.describe()}") from e
        return sorted(f for f in files if f.startswith(prefix))

    def download(self, path: str) -> Path:
        self._check_online()
        fn = self._download_fn
        if fn is None:
            from huggingface_hub import hf_hub_download

            fn = hf_hub_download
        try:
            return Path(fn(self.repo_id, path, repo_type="dataset", token=self.token))
        except Exception as e:  # noqa: BLE001
            raise self._translate(e, f"downloading {path}") from e


def remote_from_spec(spec: str, token: str | None = None) -> Remote:
    """`file:///abs/folder` -> FolderRemote; `owner/name` -> HubRemote (token or $HF_TOKEN)."""
    if spec.startswith("file://"):
        return FolderRemote(Path(spec[len("file://"):]))
    return HubRemote(spec, token=token if token is not None else os.environ.get("HF_TOKEN"))
