"""A clean clone's first start: from `python app.py` to the first Compare answer of the README
walk-through (the first gallery reference, the README's edit), in a fresh embedding cache.

Each repeat starts `python app.py` with an empty CIR_CACHE_DIR, waits for the port, then asks
`/compare` (gradio_client, the app's JSON API) and times the whole: interpreter start, imports,
the engine (backbone, world gallery, shipped embeddings, index), the server, the request.
Prints one JSON line with each run's seconds, the median and the spread. With `--baseline DIR`
(a checkout of older code, e.g. `git worktree add /tmp/old HEAD~3`) the two alternate run by run
and the line adds the baseline's runs and the paired ratios (ours / baseline).

    python bench/bench_first_start.py [--repeats 5] [--baseline DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from cir_core.config import git_commit  # noqa: E402

EDIT = "Make the square blue. Move the character to the left."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(proc: subprocess.Popen, port: int, hint: str = "") -> None:
    """Until the app listens on `port`; RuntimeError (with `hint`) if it exits first."""
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"app.py exited with {proc.returncode}{hint}") from None
            time.sleep(0.05)


def once(reference: str, root: Path = ROOT, gallery: str | None = None, cache: Path | None = None,
         edit: str = EDIT) -> dict:
    """`python app.py` (with `--gallery gallery`) from start to its first /compare answer, with
    `cache` as CIR_CACHE_DIR (default: a new empty one, removed after)."""
    from gradio_client import Client

    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        where = str(cache) if cache is not None else tmp
        env = {**os.environ, "CIR_CACHE_DIR": where, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
        t0 = time.monotonic()
        extra = ["--gallery", gallery] if gallery else []
        proc = subprocess.Popen([sys.executable, "app.py", *extra, "--host", "127.0.0.1", "--port", str(port)],
                                cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_listening(proc, port)
            listening = time.monotonic() - t0
            res = Client(f"http://127.0.0.1:{port}/", verbose=False).predict(
                reference, edit, 8, "cosine", None, None, api_name="/compare")
            answered = time.monotonic() - t0
            assert all(m["error"] is None for m in res["methods"]), res
            encoded = sum(1 for _ in Path(where).rglob("embeddings.npy"))
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    return {"listening_s": round(listening, 2), "first_answer_s": round(answered, 2), "cache_files": encoded}


def _spread(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"median": xs[len(xs) // 2], "min": xs[0], "max": xs[-1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--reference", default="test/000000", help="the first gallery image (a demo query)")
    ap.add_argument("--baseline", type=Path, help="a checkout of other code, run in turn with this one")
    a = ap.parse_args()
    runs, base = [], []
    for _ in range(a.repeats):  # in turn, so a drift of the machine's speed hits both alike
        runs.append(once(a.reference))
        if a.baseline is not None:
            base.append(once(a.reference, a.baseline.resolve()))
    out = {"bench": "first_start", "repeats": a.repeats, "runs": runs,
           "first_answer_s": _spread([r["first_answer_s"] for r in runs]), "goal_s": 10}
    if base:
        # the baseline by its commit: its folder is this machine's, meaningless in the docs
        out.update(code=git_commit(), baseline_code=git_commit(a.baseline.resolve()), baseline_runs=base,
                   baseline_first_answer_s=_spread([r["first_answer_s"] for r in base]),
                   ratio=_spread([round(r["first_answer_s"] / b["first_answer_s"], 3) for r, b in zip(runs, base)]))
    out.update(load_avg_1m=round(os.getloadavg()[0], 2), date=time.strftime("%Y-%m-%d"))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
