"""A Space's start on a real-size Hub gallery: from `python app.py --gallery hf:...` to the first
Compare answer, with an empty cache (everything the start needs is downloaded) and a warm one, and
the app's peak memory.

The gallery is pushed once (kept in --work) by the real `push gallery` code to a folder remote
standing in for the Hub (`CIR_LOCAL_HUB`): --n synthetic 320x180 JPEG frames, their thumbnails,
and an index folder of --n random unit vectors of ViT-L-14's width (768) "embedded with"
ViT-L-14 at random init (encoding 100k frames on this CPU would take a day; the start-up reads the
vectors, never the encoder's output). The app runs ViT-L-14 at random init with random-init
checkpoints of its four trained columns, so the start builds what a real one builds. Each run
alternates empty and warm; one JSON line with every run, the medians and the load average.

    python bench/bench_hub_start.py [--n 100000] [--repeats 3] [--work /tmp/cir-hub-start]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_first_start import free_port, wait_listening  # noqa: E402  (bench/ is this script's folder)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REPO, BACKBONE = "bench/frames", "ViT-L-14"
EDIT = "Make the square blue. Move the character to the left."


def make_frames(folder: Path, n: int, seed: int = 0) -> None:
    """n smooth 320x180 JPEGs (a 16x9 random colour field, upsampled) in folders of 10,000."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for i in range(n):
        path = folder / f"film{i // 10_000:03d}" / f"shot_{i:06d}.jpg"
        if path.is_file():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        small = Image.fromarray(rng.integers(0, 256, (9, 16, 3), dtype=np.uint8))
        small.resize((320, 180), Image.BICUBIC).save(path, quality=85)


def index_folder(frames: Path, out: Path, backbone_id: str, dim: int) -> None:
    """An exact index folder of `frames` with random unit vectors in place of their embeddings."""
    from bench.load_compare import write_vectors
    from cir_core.gallery import Gallery

    g = Gallery.from_folder(frames)
    write_vectors(out, backbone_id, dim, len(g))
    rows = [{"id": it.id, "path": it.path, "fingerprint": g.fingerprint(i)} for i, it in enumerate(g.items)]
    (out / "gallery.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def setup(work: Path, n: int) -> list[str]:
    """Push the gallery (once) and write the checkpoints; the app's flags."""
    ckpt, hub = work / "vitl14-methods", work / "hub"
    if not (hub / "datasets" / REPO / "refs" / "tags" / "v1").is_file():
        from cir_core.backbone import load_backbone
        from cir_core.hub.gallery import push_gallery
        from cir_core.methods import default_columns, get_method_class
        from cir_core.storage import FolderStore

        bb = load_backbone(BACKBONE, None)
        for name in default_columns():
            get_method_class(name)(bb).save(ckpt / name)
        make_frames(work / "frames", n)
        index_folder(work / "frames", work / "frames.index", bb.id, bb.dim)
        push_gallery(str(work / "frames"), REPO, indexes=[str(work / "frames.index")], work=work / "stage",
                     tag="v1", backend=FolderStore(hub, hub / ".cache"))
    return ["--backbone", BACKBONE, "--gallery", f"hf:{REPO}@v1", "--checkpoints", str(ckpt)]


def peak_rss_gb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 2**20, 2)
    return float("nan")


def once(work: Path, flags: list[str], cold: bool) -> dict:
    from gradio_client import Client

    hub = work / "hub"
    if cold:
        shutil.rmtree(hub / ".cache", ignore_errors=True)
    port = free_port()
    env = {**os.environ, "CIR_LOCAL_HUB": str(hub), "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False",
           "CIR_CACHE_DIR": str(work / "cir-cache"), "CIR_DB": str(work / "db.sqlite")}
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "app.py", "--host", "127.0.0.1", "--port", str(port), *flags],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=open(work / "app.log", "w"))
    try:
        wait_listening(proc, port, f": see {work / 'app.log'}")
        listening = time.monotonic() - t0
        res = Client(f"http://127.0.0.1:{port}/", verbose=False).predict(
            "film000/shot_000000.jpg", EDIT, 8, "cosine", None, None, api_name="/compare")
        answered = time.monotonic() - t0
        assert "error" not in res and all(m["error"] is None for m in res["methods"]), res
        peak = peak_rss_gb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    cached = sum(p.stat().st_size for p in (hub / ".cache").rglob("*") if p.is_file())
    return {"cache": "empty" if cold else "warm", "listening_s": round(listening, 2),
            "first_answer_s": round(answered, 2), "peak_rss_gb": peak, "cache_gb": round(cached / 2**30, 3),
            "load_avg_1m": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", default="/tmp/cir-hub-start")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    flags = setup(work, a.n)
    runs = []
    for _ in range(a.repeats):
        runs.append(once(work, flags, cold=True))
        runs.append(once(work, flags, cold=False))

    def med(kind: str, key: str) -> float:
        return float(np.median([r[key] for r in runs if r["cache"] == kind]))

    print(json.dumps({"bench": "hub_start", "n": a.n, "backbone": BACKBONE, "runs": runs,
                      "first_answer_s": {k: med(k, "first_answer_s") for k in ("empty", "warm")},
                      "peak_rss_gb": max(r["peak_rss_gb"] for r in runs), "goal_warm_s": 30,
                      "date": time.strftime("%Y-%m-%d %H:%M"),
                      "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()}))


if __name__ == "__main__":
    main()
