"""The one rule for which files a request may make the server open.

A handler may read an image file only when Gradio itself received it through its upload route for
this app process (`Blocks.upload_file_set`) and it lies in Gradio's upload folder after every
symlink is resolved. Everything else — an absolute path, `..`, a symlink planted in the upload
folder, a FileData naming a file Gradio wrote as an *output* (another user's figure or export) —
is refused with one message that never depends on whether the path exists: the checks below look
at the path string and where it resolves to, and nothing is opened before they pass.

Gradio does not record which session uploaded a file, so "uploaded" means "to this app process":
a client that knows the exact cache path of someone else's upload (it contains the file's content
hash) could reuse it. Query lists never name files at all in the app (`cir_core.figures`
refuses `reference_path` without an image root, and the app gives none).
"""
from __future__ import annotations

import os
from collections.abc import Collection
from typing import Any

from cir_core.errors import InputError

REFUSED = ("The reference image must be a file uploaded to this app (the Upload tab, or "
           "gradio_client.handle_file(path) for the API); server paths are not accepted.")


class UploadRefused(InputError):
    """A request named a file that is not one of this app's uploads."""


def _path_of(file: Any) -> Any:
    if isinstance(file, (str, os.PathLike)):
        return os.fspath(file)
    if isinstance(file, dict):
        return file.get("path")
    return getattr(file, "path", None)


def app_uploads() -> Collection[str] | None:
    """The paths Gradio's upload route saved for the running app; None outside a request."""
    try:
        from gradio.context import LocalContext
    except ImportError:  # pragma: no cover (gradio is a requirement of ui/)
        return None
    blocks = LocalContext.blocks.get(None)
    return None if blocks is None else getattr(blocks, "upload_file_set", None)


def upload_folder() -> str:
    from gradio.utils import get_upload_folder

    return str(get_upload_folder())


def uploaded_path(file: Any, uploads: Collection[str] | None = None, folder: str | None = None) -> str | None:
    """The server path of an upload (a path string, a FileData or its dict), or None for "no
    upload". Raises `UploadRefused` (one message) unless the path is absolute and normalised,
    resolves inside Gradio's upload folder, and — inside a running app, or when `uploads` is
    given — is one of the files Gradio's upload route received."""
    if file is None or file == "" or file == {}:
        return None
    path = _path_of(file)
    if path is None or path == "":
        return None
    if not isinstance(path, str) or "\x00" in path or len(path) > 4096:
        raise UploadRefused(REFUSED)
    if not os.path.isabs(path) or os.path.normpath(path) != path:
        raise UploadRefused(REFUSED)  # relative, `..`, `//`: never what Gradio hands out
    root = os.path.realpath(folder or upload_folder())
    real = os.path.realpath(path)
    if os.path.commonpath([root, real]) != root or real == root:
        raise UploadRefused(REFUSED)  # outside the upload folder once symlinks are resolved
    known = uploads if uploads is not None else app_uploads()
    if known is not None and path not in known:
        raise UploadRefused(REFUSED)
    return path
