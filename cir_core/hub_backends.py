"""Where `cir_core.hub` pushes to and pulls from: the Hugging Face Hub (`HFBackend`) or a plain
folder (`LocalFolderBackend`, used by the tests and usable air-gapped).

Both speak the same small `HubBackend` interface, shaped after `huggingface_hub`'s
`upload_folder` / `snapshot_download`, and raise the same three exceptions, so `cir_core.hub`
decides once what an unreachable Hub, a missing repo or an empty cache means.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Protocol, Sequence

from .errors import CIRError
from .fileio import sha256_file


class HubError(CIRError):
    """A Hub repo could not be pushed, fetched or trusted; the message names the repo."""


class NotFound(HubError):
    """The repo or the revision does not exist (or is private and no token was given)."""


class Unreachable(HubError):
    """The Hub could not be asked (no network, HF_HUB_OFFLINE, a 5xx): the cache may still help."""


class NotCached(HubError):
    """Asked for cached files only, and the cache has no snapshot of that revision."""


@dataclass(frozen=True)
class Snapshot:
    """A downloaded (or cached) revision: its folder and the full commit sha it resolved to."""

    path: Path
    commit: str


class HubBackend(Protocol):
    """The two Hub operations `cir_core.hub` needs, plus tagging."""

    name: str

    def upload_folder(self, repo_id: str, folder: Path, *, repo_type: str, branch: str,
                      message: str) -> str:
        """Make `branch` hold exactly the files of `folder` (creating repo and branch if needed);
        returns the new commit's sha."""

    def create_tag(self, repo_id: str, tag: str, commit: str, *, repo_type: str) -> None:
        """Point `tag` at `commit`."""

    def snapshot_download(self, repo_id: str, *, repo_type: str, revision: str | None,
                          allow_patterns: Sequence[str] | None, local_files_only: bool) -> Snapshot:
        """The files of `revision` (branch, tag or sha; None: main) matching `allow_patterns`."""


def matches(path: str, patterns: Sequence[str] | None) -> bool:
    """`huggingface_hub`'s rule: no patterns means everything; `*` also crosses '/'."""
    return patterns is None or any(fnmatch(path, p) for p in patterns)


class HFBackend:
    """The real Hub, through `huggingface_hub` (token from HF_TOKEN or `hf auth login`)."""

    name = "huggingface_hub"

    def __init__(self, token: str | None = None, cache_dir: str | None = None):
        self.token, self.cache_dir = token, cache_dir

    def _api(self):
        from huggingface_hub import HfApi

        return HfApi(token=self.token)

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
                          allow_patterns: Sequence[str] | None, local_files_only: bool) -> Snapshot:
        from huggingface_hub import snapshot_download

        with _translated(repo_id, revision):
            if not local_files_only:
                # Resolve the sha online first: snapshot_download alone would fall back to the
                # cache silently when the Hub is unreachable, and we must say when we do that.
                info = self._api().repo_info(repo_id, repo_type=repo_type, revision=revision)
                revision = str(info.sha)
            path = snapshot_download(repo_id, repo_type=repo_type, revision=revision,
                                     allow_patterns=list(allow_patterns) if allow_patterns else None,
                                     local_files_only=local_files_only, cache_dir=self.cache_dir,
                                     token=self.token)
        return Snapshot(Path(path), Path(path).name)  # the cache keeps snapshots/<sha>/


class _translated:
    """Map `huggingface_hub`'s exceptions onto NotFound / Unreachable / NotCached."""

    def __init__(self, repo_id: str, revision: str | None):
        self.what = f"{repo_id}@{revision or 'main'}"

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        if exc is None or isinstance(exc, HubError):
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
            raise HubError(f"{self.what}: {first}") from None
        if isinstance(exc, (errors.HfHubHTTPError, errors.OfflineModeIsEnabled, OSError)) or \
                type(exc).__module__.startswith(("httpx", "requests", "urllib3")):
            raise Unreachable(f"{self.what}: {type(exc).__name__}: {first}") from None
        return False


def _tree_digest(files: dict[str, str], parent: str) -> str:
    h = hashlib.sha1(parent.encode())
    for rel in sorted(files):
        h.update(f"\n{rel}\0{files[rel]}".encode())
    return h.hexdigest()




def _copy_tree(src: Path, dst: Path, patterns: Sequence[str] | None = None) -> None:
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src).as_posix()
        if p.is_file() and matches(rel, patterns):
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dst / rel)


class LocalFolderBackend:
    """A Hub in a folder, with a cache beside it that mimics the Hugging Face cache.

    Layout: `root/<repo_type>s/<org>/<name>/commits/<sha>/…` (one full tree per commit) and
    `…/refs/heads/<branch>`, `…/refs/tags/<tag>` (each holds a sha). Downloads copy into
    `cache_dir/<repo_type>s--<org>--<name>/snapshots/<sha>/` and record `refs/<revision>`, so
    `local_files_only=True` behaves like `huggingface_hub`'s. `online=False` plays a dead network.
    """

    name = "local-folder"

    def __init__(self, root: str | os.PathLike, cache_dir: str | os.PathLike, online: bool = True):
        self.root, self.cache_dir, self.online = Path(root), Path(cache_dir), online

    def _repo(self, repo_id: str, repo_type: str) -> Path:
        return self.root / f"{repo_type}s" / repo_id

    def _cache(self, repo_id: str, repo_type: str) -> Path:
        return self.cache_dir / f"{repo_type}s--{repo_id.replace('/', '--')}"

    def _ref(self, repo: Path, name: str) -> str | None:
        for kind in ("heads", "tags"):
            f = repo / "refs" / kind / name
            if f.is_file():
                return f.read_text().strip()
        commits = [c.name for c in (repo / "commits").glob(f"{name}*")] if len(name) >= 7 else []
        return commits[0] if len(commits) == 1 else None

    def upload_folder(self, repo_id: str, folder: Path, *, repo_type: str, branch: str,
                      message: str) -> str:
        repo = self._repo(repo_id, repo_type)
        files = {p.relative_to(folder).as_posix(): sha256_file(p)
                 for p in sorted(Path(folder).rglob("*")) if p.is_file()}
        parent = self._ref(repo, branch) or self._ref(repo, "main") or ""
        sha = _tree_digest(files, parent + message)
        tree = repo / "commits" / sha
        if not tree.is_dir():
            tmp = repo / "commits" / f".{sha}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            _copy_tree(Path(folder), tmp)
            os.replace(tmp, tree)
        head = repo / "refs" / "heads" / branch
        head.parent.mkdir(parents=True, exist_ok=True)
        head.write_text(sha)
        return sha

    def create_tag(self, repo_id: str, tag: str, commit: str, *, repo_type: str) -> None:
        repo = self._repo(repo_id, repo_type)
        if not (repo / "commits" / commit).is_dir():
            raise NotFound(f"{repo_id}@{commit}: no such commit to tag")
        f = repo / "refs" / "tags" / tag
        if f.exists():
            raise HubError(f"{repo_id}: tag {tag!r} already exists (tags are immutable)")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(commit)

    def snapshot_download(self, repo_id: str, *, repo_type: str, revision: str | None,
                          allow_patterns: Sequence[str] | None, local_files_only: bool) -> Snapshot:
        rev = revision or "main"
        cache = self._cache(repo_id, repo_type)
        if local_files_only:
            ref = cache / "refs" / rev
            sha = ref.read_text().strip() if ref.is_file() else rev
            snap = cache / "snapshots" / sha
            if not snap.is_dir():
                raise NotCached(f"{repo_id}@{rev}: not in the local cache {cache}")
            return Snapshot(snap, sha)
        if not self.online:
            raise Unreachable(f"{repo_id}@{rev}: the local hub is set offline")
        repo = self._repo(repo_id, repo_type)
        if not repo.is_dir():
            raise NotFound(f"{repo_id}@{rev}: no such repository in {self.root}")
        sha = self._ref(repo, rev)
        if sha is None:
            raise NotFound(f"{repo_id}@{rev}: no such revision (branch, tag or commit)")
        snap = cache / "snapshots" / sha
        _copy_tree(repo / "commits" / sha, snap, allow_patterns)
        (cache / "refs" / rev).parent.mkdir(parents=True, exist_ok=True)
        (cache / "refs" / rev).write_text(sha)
        return Snapshot(snap, sha)
