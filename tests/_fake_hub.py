"""A Hugging Face Hub stand-in over HTTP on 127.0.0.1, serving the repos of a `FolderStore` root,
so the real `huggingface_hub` client (HF_ENDPOINT pointed here) downloads into its real cache
layout (blobs/, snapshots/<sha>/ symlinks, refs/). It answers the two calls `HFStore` makes:
`repo_info` (GET /api/<type>s/<repo>/revision/<rev>) and a file (HEAD/GET
/<type>s/<repo>/resolve/<rev>/<path>, with X-Repo-Commit and ETag). Every file request is logged.
`write_frames` makes the folder of frames the Hub gallery tests push."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

from cir_core.fileio import sha256_file


def write_frames(root: Path, n: int) -> Path:
    """A manifest of `n` JPEG frames (200 x 150, two folders) with the gallery's own columns, as a
    researcher's folder of frames would be; returns the manifest's path."""
    from cir_core.world import build_benchmark

    bench = build_benchmark("test", max(1, n // 6 + 1))
    rows = []
    for i, it in enumerate(bench.items[:n]):
        rel = f"film{i % 2}/shot_{i:04d}.jpg"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        it.image(200).resize((200, 150)).save(root / rel, quality=90)
        rows.append({"path": rel, "id": rel, "character": it.scene.character.name, "caption": f"frame {i}",
                     "box": [1, 2, 30, 40]})
    (root / "frames.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root / "frames.jsonl"


class FakeHub:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.files: list[tuple[str, str]] = []  # (method, repo path) of every file request
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                hub.answer(self, body=False)

            def do_GET(self):
                hub.answer(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _commit(self, repo: Path, rev: str) -> str | None:
        for kind in ("heads", "tags"):
            f = repo / "refs" / kind / rev
            if f.is_file():
                return f.read_text().strip()
        return rev if (repo / "commits" / rev).is_dir() else None

    def answer(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        parts = [unquote(p) for p in h.path.split("?")[0].strip("/").split("/")]
        if parts[:1] == ["api"] and len(parts) >= 6 and parts[4] == "revision":  # repo_info
            repo = self.root / parts[1] / parts[2] / parts[3]
            sha = self._commit(repo, parts[5]) if repo.is_dir() else None
            if sha is None:
                return self._send(h, 404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound"})
            tree = repo / "commits" / sha
            info = {"id": f"{parts[2]}/{parts[3]}", "sha": sha,
                    "siblings": [{"rfilename": p.relative_to(tree).as_posix()} for p in tree.rglob("*") if p.is_file()]}
            return self._send(h, 200, json.dumps(info).encode(), {"Content-Type": "application/json"}, body)
        if len(parts) >= 6 and parts[3] == "resolve":  # a file
            repo = self.root / parts[0] / parts[1] / parts[2]
            sha = self._commit(repo, parts[4]) if repo.is_dir() else None
            path = "/".join(parts[5:])
            f = repo / "commits" / sha / path if sha else None
            if f is None or not f.is_file():
                return self._send(h, 404, b"not found", {"X-Error-Code": "EntryNotFound"})
            self.files.append((h.command, path))
            data = f.read_bytes()
            return self._send(h, 200, data, {"X-Repo-Commit": sha, "ETag": f'"{sha256_file(f)}"',
                                             "Content-Type": "application/octet-stream"}, body)
        self._send(h, 404, b"unknown route")

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, code: int, data: bytes, headers: dict | None = None,
              body: bool = True) -> None:
        h.send_response(code)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if body:
            h.wfile.write(data)
