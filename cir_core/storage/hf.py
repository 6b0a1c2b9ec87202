"""`HFStore`: the Hugging Face Hub through `huggingface_hub`, as a `Store`."""
from __future__ import annotations

import re
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Literal, Mapping, Sequence

from .base import NotCached, NotFound, Revision, StorageError, Unreachable

_SHA = re.compile(r"[0-9a-f]{40}")


class HFStore:
    """The real Hub, through `huggingface_hub` (token from HF_TOKEN or `hf auth login`). `api` and
    `download_fn` default to `HfApi(token)` and `hf_hub_download`; tests pass fakes."""

    name = "huggingface_hub"

    def __init__(self, token: str | None = None, cache_dir: str | None = None, api: Any = None,
                 download_fn: Callable[..., str] | None = None):
        self.token, self.cache_dir = token, cache_dir
        self._api_obj, self._download_fn = api, download_fn

    def describe(self, repo_id: str) -> str:
        return f"Hub repo {repo_id}"

    def _api(self):
        if self._api_obj is None:
            from huggingface_hub import HfApi

            self._api_obj = HfApi(token=self.token)
        return self._api_obj

    def upload_folder(self, repo_id: str, folder: Path, *, repo_type: str, branch: str,
                      message: str) -> str:
        api = self._api()
        with _translated(repo_id, branch):
            api.create_repo(repo_id, repo_type=repo_type, exist_ok=True)
            if branch != "main":
                api.create_branch(repo_id, branch=branch, repo_type=repo_type, exist_ok=True)
            # delete_patterns="*": files left from an earlier push would fail the manifest check
            # (.gitattributes is never deleted by huggingface_hub, and pull ignores it).
            info = api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type=repo_type,
                                     revision=branch, commit_message=message, delete_patterns="*")
        return str(info.oid)

    def create_tag(self, repo_id: str, tag: str, commit: str, *, repo_type: str) -> None:
        with _translated(repo_id, commit):
            self._api().create_tag(repo_id, tag=tag, revision=commit, repo_type=repo_type)

    def snapshot_download(self, repo_id: str, *, repo_type: str, revision: str | None,
                          allow_patterns: Sequence[str] | None, local_files_only: bool) -> Revision:
        from huggingface_hub import snapshot_download

        from ..progress import tracked_tqdm

        with _translated(repo_id, revision):
            if not local_files_only:
                # Resolve the sha online first: snapshot_download alone would fall back to the
                # cache silently when the Hub is unreachable, and we must say when we do that.
                info = self._api().repo_info(repo_id, repo_type=repo_type, revision=revision)
                revision = str(info.sha)
            # its files' bar also listed for the page (n/N files, an ETA: cir_core.progress)
            path = snapshot_download(repo_id, repo_type=repo_type, revision=revision,
                                     allow_patterns=list(allow_patterns) if allow_patterns else None,
                                     local_files_only=local_files_only, cache_dir=self.cache_dir,
                                     token=self.token, tqdm_class=tracked_tqdm())
        return Revision(Path(path), Path(path).name)  # the cache keeps snapshots/<sha>/


    def fetch_file(self, repo_id: str, path: str, *, repo_type: str, revision: str | None,
                   local_files_only: bool) -> Revision:
        from huggingface_hub import errors, hf_hub_download

        with _translated(repo_id, revision):
            if not local_files_only and not _SHA.fullmatch(revision or ""):
                # Asked online first, as in snapshot_download: hf_hub_download would fall back to
                # the cache silently when the Hub is unreachable. The download itself then names
                # the branch or tag, so the cache records it (refs/<rev>) for an offline start.
                self._api().repo_info(repo_id, repo_type=repo_type, revision=revision)
            # a commit sha whose file is cached is answered from the cache with no request at all
            try:
                got = Path(hf_hub_download(repo_id, path, repo_type=repo_type, revision=revision or "main",
                                           cache_dir=self.cache_dir, token=self.token,
                                           local_files_only=local_files_only))
            except errors.LocalEntryNotFoundError as exc:
                if local_files_only:
                    raise
                # online, this means the file's request failed and the cache has no copy
                raise Unreachable(f"{repo_id}@{revision}: {path}: {str(exc).splitlines()[0]}") from None
        snap = got.parents[len(path.split("/")) - 1]  # .../snapshots/<sha>/<path>
        return Revision(snap, snap.name)

    # -- single files on main (the annotation DB's snapshots) -------------------------------------
    def _check_online(self, repo_id: str) -> None:
        from huggingface_hub import constants

        # huggingface_hub reads HF_HUB_OFFLINE once, at import; the app sets it when its settings
        # name no Hub model. Say so, rather than fail as a vague "cannot locate the file".
        if constants.HF_HUB_OFFLINE:
            raise Unreachable(f"HF_HUB_OFFLINE is set, so {self.describe(repo_id)} cannot be reached; "
                              "unset it (before huggingface_hub is imported) to reach it")

    def commit(self, repo_id: str, adds: Mapping[str, Path], deletes: Sequence[str], *, repo_type: str,
               message: str) -> None:
        self._check_online(repo_id)
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete
        from huggingface_hub import errors as hf

        ops: list[Any] = [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(local))
                          for rel, local in adds.items()]
        ops += [CommitOperationDelete(path_in_repo=rel) for rel in deletes]
        api = self._api()

        def commit() -> None:
            api.create_commit(repo_id, ops, commit_message=message, repo_type=repo_type, token=self.token)

        try:
            try:
                commit()
            except hf.RepositoryNotFoundError:
                # Created only when missing (a fine-grained token may write to a repo yet not be
                # allowed to create one). It may hold personal data (annotations): private.
                api.create_repo(repo_id, repo_type=repo_type, private=True, exist_ok=True, token=self.token)
                commit()
        except Exception as e:  # noqa: BLE001 - every Hub failure becomes one clear error type
            raise Unreachable(f"push to {self.describe(repo_id)} failed: {e}") from e

    def list_files(self, repo_id: str, *, repo_type: str, prefix: str = "") -> list[str]:
        self._check_online(repo_id)
        from huggingface_hub import errors as hf

        try:
            files = self._api().list_repo_files(repo_id, repo_type=repo_type, token=self.token)
        except hf.RepositoryNotFoundError:
            return []
        except Exception as e:  # noqa: BLE001
            raise _file_error(e, f"listing {self.describe(repo_id)}") from e
        return sorted(f for f in files if f.startswith(prefix))

    def download(self, repo_id: str, path: str, *, repo_type: str) -> Path:
        self._check_online(repo_id)
        fn = self._download_fn
        if fn is None:
            from huggingface_hub import hf_hub_download

            fn = hf_hub_download
        try:
            return Path(fn(repo_id, path, repo_type=repo_type, token=self.token))
        except Exception as e:  # noqa: BLE001
            raise _file_error(e, f"downloading {path} from {self.describe(repo_id)}") from e


def _file_error(e: Exception, what: str) -> StorageError:
    """A single-file operation's failure: NotFound only when the Hub said so."""
    from huggingface_hub import errors as hf

    # LocalEntryNotFoundError subclasses EntryNotFoundError but means "offline / could not reach
    # the Hub": it must not be mistaken for "the repo is empty".
    if isinstance(e, hf.LocalEntryNotFoundError):
        return Unreachable(f"{what}: Hub unreachable or offline ({e})")
    if isinstance(e, hf.RepositoryNotFoundError):
        return NotFound(f"{what}: not found or not accessible (check the repo id and that HF_TOKEN can read it)")
    if isinstance(e, hf.EntryNotFoundError):
        return NotFound(f"{what}: not found")
    return Unreachable(f"{what}: {type(e).__name__}: {e}")


class _translated:
    """Map `huggingface_hub`'s exceptions onto NotFound / Unreachable / NotCached."""

    def __init__(self, repo_id: str, revision: str | None):
        self.what = f"{repo_id}@{revision or 'main'}"

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:  # never swallows one: it goes on, or a StorageError
        if exc is None or isinstance(exc, StorageError):
            return False
        from huggingface_hub import errors

        first = (str(exc).splitlines() or [""])[0]
        if isinstance(exc, errors.RevisionNotFoundError):
            raise NotFound(f"{self.what}: no such revision (branch, tag or commit)") from None
        if isinstance(exc, errors.RepositoryNotFoundError):  # GatedRepoError is one too
            raise NotFound(f"{self.what}: no such repository, or it is private or gated "
                           "(set HF_TOKEN or run `hf auth login`)") from None
        if isinstance(exc, errors.LocalEntryNotFoundError):
            raise NotCached(f"{self.what}: not in the local Hugging Face cache") from None
        if isinstance(exc, errors.HFValidationError):
            raise StorageError(f"{self.what}: {first}") from None
        if isinstance(exc, (errors.HfHubHTTPError, errors.OfflineModeIsEnabled, OSError)) or \
                type(exc).__module__.startswith(("httpx", "requests", "urllib3")):
            raise Unreachable(f"{self.what}: {type(exc).__name__}: {first}") from None
        return False
