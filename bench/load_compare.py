"""Many visitors at once: the real app (`python app.py`, one process) driven by 1, 4, 16 and 32
concurrent gradio_client sessions calling Compare, with the engine's batching on and off.

Each client is a thread of this one process with its own `gradio_client.Client` (the clients
mostly wait on sockets; their CPU share is measured and printed, with the load average, so a
client-bound run shows). Every request has its own reference and its own edit text, and its answer
is checked to be for that reference and that text (a request lost, answered for another, or told
"busy" is counted, never dropped). One JSON line per (setup, batching, clients): p50/p95 latency,
throughput, the clients' and the app's CPU, the load average.

    python bench/load_compare.py --setup world                # the shipped world and tiny backbone
    python bench/load_compare.py --setup vitb32               # ViT-B-32 at random init over 100k vectors
    python bench/load_compare.py --setup world,vitb32 --clients 1,4,16,32 --rounds 2

`vitb32` builds, once, in --work: an index folder of 100k random unit vectors embedded "with"
ViT-B-32@random-seed0, and random-init checkpoints of the app's four trained columns for it (the
same compute as trained ones), so the app runs its default columns at real size.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
EDIT = "Make the square blue. Move the character {c} steps to the left, then {r} more."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare_vitb32(work: Path, n: int) -> list[str]:
    """The app flags for ViT-B-32 over n random vectors (built once under `work`)."""
    gal, ckpt = work / f"random-{n}.index", work / "vitb32-methods"
    if not (gal / "build.json").is_file() or not ckpt.is_dir():
        from cir_core.backbone import load_backbone
        from cir_core.methods import default_columns, get_method_class

        bb = load_backbone("ViT-B-32", None)
        for name in default_columns():
            get_method_class(name)(bb).save(ckpt / name)
        write_vectors(gal, bb.id, bb.dim, n)
    return ["--backbone", "ViT-B-32", "--gallery", str(gal), "--checkpoints", str(ckpt)]


def write_vectors(folder: Path, backbone_id: str, dim: int, n: int, seed: int = 0) -> None:
    """An exact index folder (cir_core.index.prebuilt, format 2) of `n` random unit vectors."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    emb = np.lib.format.open_memmap(folder / "embeddings.npy", mode="w+", dtype=np.float32, shape=(n, dim))
    for s in range(0, n, 20_000):
        block = rng.standard_normal((min(20_000, n - s), dim), dtype=np.float32)
        emb[s:s + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    emb.flush()
    np.save(folder / "norms.npy", np.full(n, 10.0, np.float32))
    (folder / "gallery.jsonl").write_text("".join(json.dumps({"id": f"v{i:07d}", "fingerprint": f"v{i}"}) + "\n"
                                                  for i in range(n)))
    (folder / "skipped.jsonl").write_text("")
    (folder / "build.json").write_text(json.dumps({"format": 2, "name": folder.stem, "backbone": backbone_id,
                                                   "dim": dim, "n": n, "kind": "flat", "skipped": 0}))


class App:
    """`python app.py FLAGS` on a free port, until stopped; `cpu()` its CPU seconds so far."""

    def __init__(self, flags: list[str], env: dict[str, str], log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = open(log, "w")
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--host", "127.0.0.1", "--port",
                                      str(self.port), *flags], cwd=ROOT, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def wait(self, timeout: float = 600) -> None:
        from gradio_client import Client

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the app exited ({self.proc.returncode}); see {self.log.name}")
            try:
                Client(self.url, verbose=False)
                return
            except Exception:
                time.sleep(1.0)
        raise RuntimeError(f"the app did not answer within {timeout} s")

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def client_loop(client, c: int, refs: list[str], per_client: int, out: list, start: threading.Barrier,
                scoring: str) -> None:
    start.wait()
    for r in range(per_client):
        ref, edit = refs[(c * 7919 + r * 104729) % len(refs)], EDIT.format(c=c, r=r)
        t0 = time.perf_counter()
        try:
            res = client.predict(ref, edit, 8, scoring, None, None, api_name="/compare")
        except Exception as exc:  # a time-out or a dropped connection: counted, never hidden
            out.append((time.perf_counter() - t0, "failed", f"{type(exc).__name__}: {exc}"[:200]))
            continue
        took = time.perf_counter() - t0
        if "error" in res:
            out.append((took, "busy" if "busy" in res["error"] else "error", res["error"][:200]))
        elif res["reference"]["item_id"] != ref or res["edit"] != edit or \
                not all(m["error"] is None and len(m["hits"]) == 8 for m in res["methods"]):
            out.append((took, "wrong", f"asked {ref!r} {edit!r}, got {res['reference']['item_id']!r} {res['edit']!r}"))
        else:
            out.append((took, "ok", ""))


def phase(app: App, n_clients: int, per_client: int, refs: list[str], scoring: str) -> dict:
    from gradio_client import Client

    clients = [Client(app.url, verbose=False) for _ in range(n_clients)]
    outs: list[list] = [[] for _ in range(n_clients)]
    start = threading.Barrier(n_clients + 1)
    threads = [threading.Thread(target=client_loop, args=(clients[c], c, refs, per_client, outs[c], start, scoring))
               for c in range(n_clients)]
    for t in threads:
        t.start()
    load0, app0, me0 = os.getloadavg()[0], app.cpu(), resource.getrusage(resource.RUSAGE_SELF)
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    me1 = resource.getrusage(resource.RUSAGE_SELF)
    got = [x for o in outs for x in o]
    ok = [t for t, status, _ in got if status == "ok"]
    cores = os.cpu_count() or 1
    lat = np.asarray(ok) if ok else np.asarray([np.nan])
    return {"clients": n_clients, "requests": len(got), "ok": len(ok),
            "busy": sum(s == "busy" for _, s, _ in got), "wrong": sum(s == "wrong" for _, s, _ in got),
            "failed": sum(s in ("failed", "error") for _, s, _ in got),
            "problems": sorted({m for _, s, m in got if s != "ok"})[:3],
            "p50_s": round(float(np.percentile(lat, 50)), 3), "p95_s": round(float(np.percentile(lat, 95)), 3),
            "throughput_rps": round(len(ok) / wall, 2), "wall_s": round(wall, 1),
            "client_cpu_share": round((me1.ru_utime + me1.ru_stime - me0.ru_utime - me0.ru_stime) / (wall * cores), 3),
            "app_cpu_share": round((app.cpu() - app0) / (wall * cores), 3),
            "load_avg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def run_setup(setup: str, batching: bool, args: argparse.Namespace) -> list[dict]:
    flags = prepare_vitb32(Path(args.work), args.n) if setup == "vitb32" else []
    env = {**os.environ, "CIR_BATCHING": "on" if batching else "off", "HF_HUB_OFFLINE": "1",
           "GRADIO_ANALYTICS_ENABLED": "False", "CIR_CACHE_DIR": args.cache_dir, "CIR_DB": str(Path(args.work) / "db.sqlite")}
    app = App(flags, env, Path(args.work) / f"app-{setup}-{'on' if batching else 'off'}.log")
    try:
        app.wait()
        refs = refs_of(app)
        phase(app, 2, 3, refs, args.scoring)  # warm-up: methods built, thread pools up
        out = []
        for n in args.clients:
            res = phase(app, n, args.per_client, refs, args.scoring)
            res.update(bench="load_compare", setup=setup, batching=batching, scoring=args.scoring,
                       date=time.strftime("%Y-%m-%d %H:%M"), uptime=uptime())
            print(json.dumps(res), flush=True)
            out.append(res)
        return out
    finally:
        app.stop()


def refs_of(app: App) -> list[str]:
    """Gallery ids to use as references: a first answer's hits, then theirs (any gallery works)."""
    from gradio_client import Client

    c = Client(app.url, verbose=False)
    seen, frontier = [], ["test/000000", "v0000000"]
    while frontier and len(seen) < 64:
        res = c.predict(frontier.pop(), "Add a star.", 8, "cosine", None, None, api_name="/compare")
        if "error" in res:
            continue
        for m in res["methods"]:
            for h in m["hits"]:
                if h["item_id"] not in seen:
                    seen.append(h["item_id"])
                    frontier.append(h["item_id"])
    if not seen:
        raise RuntimeError("no reference id answered")
    return seen


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setup", default="world,vitb32", help="world, vitb32 (comma-separated)")
    ap.add_argument("--clients", default="1,4,16,32")
    ap.add_argument("--per-client", type=int, default=8, help="requests each client makes per phase")
    ap.add_argument("--rounds", type=int, default=1, help="batching on and off, alternately, this many times")
    ap.add_argument("--scoring", default="chord")
    ap.add_argument("--n", type=int, default=100_000, help="vectors in the vitb32 gallery")
    ap.add_argument("--work", default="/tmp/cir-load-compare")
    ap.add_argument("--cache-dir", default=os.environ.get("CIR_CACHE_DIR", str(Path.home() / ".cache" / "cir-workbench")))
    args = ap.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    Path(args.work).mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    for _ in range(args.rounds):
        for setup in args.setup.split(","):
            for batching in (True, False):
                run_setup(setup, batching, args)


if __name__ == "__main__":
    main()
