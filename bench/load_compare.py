"""Many visitors at once: the real app (`python app.py`, one process each) driven by 1, 4, 16 and
32 concurrent clients calling the JSON endpoint `/compare`, with the engine's batching on and off.

Both apps of a setup (CIR_BATCHING=on and =off) run side by side and take turns, phase by phase,
in ABBA order (for each client count: on, off, then off, on, ...), so both see the same machine
load; the idle one costs nothing. The clients are asyncio tasks in this one process, each with
its own httpx connection and Gradio session, speaking the page's queue protocol
(`load_clients.Session`): gradio_client costs a thread and a poll per job and measured its own
queueing. Each client makes `--per-client` requests one after the other (a closed loop), every one
with its own reference and its own edit text (never seen by that app before: no memo serves it).

No request is lost or mixed up: every answer must echo its own reference and edit, with every
method's k hits and no error (`check_answer`); a busy answer, an error, a dropped connection or a
wrong answer is counted, never dropped. After the phases, `--verify` answers per phase are asked
again of the batching-off app, alone, and each method's top-k must match (`same_answer`): an
answer computed from another request's rows would not.

One JSON line per (setup, round, batching, clients): p50/p95/mean latency, throughput, the
engine's own stage times (the answer's `timings`; `outside_engine_ms` = latency - its total: the
queue, the transport), the CPU shares of the app, of the clients and of the whole machine, and
the 1-minute load average sampled each second. Then one summary line per (setup, clients): the
per-round ratios on/off (median and range) and the goals' verdicts at 16 clients.

    python bench/load_compare.py --setup world                # the shipped world and tiny backbone
    python bench/load_compare.py --setup vitb32               # ViT-B-32 at random init over 100k vectors
    python bench/load_compare.py --setup world,vitb32 --clients 1,4,16,32 --rounds 2 --out docs/results/load_compare.jsonl

`vitb32` builds, once, in --work: an index folder of 100k random unit vectors embedded "with"
ViT-B-32 at random init, and random-init checkpoints of the app's four trained columns for it (the
same compute as trained ones), so the app runs its default columns at real size.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.load_clients import Session, event_indices  # noqa: E402

COLOURS = ("red", "green", "blue", "yellow", "purple", "orange", "white", "black")
STAGES = ("encode", "compose", "search", "total")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the galleries ----------------------------------------------------------------------------------

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


# -- the app and the machine ------------------------------------------------------------------------

def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of every core since boot (/proc/stat)."""
    v = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = v[3] + v[4]  # idle + iowait
    return sum(v) - idle, sum(v)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


class App:
    """`python app.py FLAGS` on a free port, until stopped."""

    def __init__(self, flags: list[str], env: dict[str, str], log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = open(log, "w")
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--host", "127.0.0.1", "--port",
                                      str(self.port), *flags], cwd=ROOT, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def wait(self, timeout: float = 900) -> None:
        import httpx

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the app exited ({self.proc.returncode}); see {self.log.name}")
            try:
                if httpx.get(self.url + "config", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        raise RuntimeError(f"the app did not answer within {timeout} s; see {self.log.name}")

    def cpu(self) -> float:
        return proc_cpu_s(self.proc.pid)

    def settle(self, quiet_share: float = 0.05, window_s: float = 2.0, timeout: float = 120) -> None:
        """Until the app uses under `quiet_share` of a core over `window_s` (its start-up threads,
        e.g. the int8 filter's build, are done)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            c0 = self.cpu()
            time.sleep(window_s)
            if (self.cpu() - c0) / window_s < quiet_share:
                return

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class LoadSampler:
    """The 1-minute load average, read every `every_s` in a thread while in the `with` block."""

    def __init__(self, every_s: float = 1.0):
        self.every_s, self.samples = every_s, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> "LoadSampler":
        self.samples.append(os.getloadavg()[0])
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])

    def summary(self) -> dict:
        s = self.samples
        return {"min": round(min(s), 2), "mean": round(statistics.fmean(s), 2), "max": round(max(s), 2)}


# -- one request and its checks ---------------------------------------------------------------------

@dataclass
class Answer:
    """One request as a client saw it."""

    client: int
    ref: str
    edit: str
    latency_s: float
    status: str  # ok, busy, error, wrong, failed
    problem: str = ""
    hits: dict[str, list[str]] = field(default_factory=dict)  # method -> top-k gallery ids
    timings: dict[str, float] = field(default_factory=dict)


def edit_for(tag: str, client: int, r: int) -> str:
    """A new edit per (app, phase, client, request): the distinct part first (a tiny backbone
    reads 32 tokens), so no memo answers it and two requests' answers differ."""
    return (f"Move the character {client} steps left and {r} up for {tag}. "
            f"Make the square {COLOURS[(client + r) % len(COLOURS)]}.")


def check_answer(res: Any, ref: str, edit: str, k: int) -> tuple[str, str]:
    """(status, problem) of a `/compare` answer for (ref, edit): ok only if it echoes this request's
    reference and edit and every method has k hits and no error."""
    if not isinstance(res, dict):
        return "error", f"not a JSON object: {str(res)[:120]}"
    if "error" in res:
        return ("busy" if "busy" in res["error"].lower() else "error"), res["error"][:200]
    got_ref, got_edit = (res.get("reference") or {}).get("item_id"), res.get("edit")
    if got_ref != ref or got_edit != edit:
        return "wrong", f"asked {ref!r} {edit[:40]!r}, got {got_ref!r} {str(got_edit)[:40]!r}"
    bad = [m.get("name") for m in res.get("methods", []) if m.get("error") is not None or len(m.get("hits", [])) != k]
    if bad or not res.get("methods"):
        return "wrong", f"methods without {k} hits: {bad or 'none answered'}"
    return "ok", ""


def hits_of(res: dict) -> dict[str, list[str]]:
    """method name -> its top-k gallery ids, in order."""
    return {m["name"]: [h["item_id"] for h in m["hits"]] for m in res["methods"]}


def same_answer(a: dict[str, list[str]], b: dict[str, list[str]], min_shared: float = 0.75) -> bool:
    """The same methods, each with at least `min_shared` of its top-k ids in common: a forward in
    another batch size may round a near-tie apart, an answer from another request's rows shares
    almost nothing."""
    if set(a) != set(b) or not a:
        return False
    return all(len(set(a[m]) & set(b[m])) >= min_shared * max(len(a[m]), 1) for m in a)


async def ask(session: Session, ref: str, edit: str, k: int, scoring: str) -> tuple[Any, float]:
    """One `/compare` call: (its answer, seconds)."""
    t0 = time.perf_counter()
    out = await session.call("compare", ref, edit, k, scoring, None, None, "", state=False)
    return out[0], time.perf_counter() - t0


async def client_loop(session: Session, c: int, plan: list[tuple[str, str]], k: int, scoring: str,
                      out: list[Answer]) -> None:
    for ref, edit in plan:
        t0 = time.perf_counter()
        try:
            res, took = await ask(session, ref, edit, k, scoring)
        except Exception as exc:  # a time-out or a dropped connection: counted, never hidden
            out.append(Answer(c, ref, edit, time.perf_counter() - t0, "failed", f"{type(exc).__name__}: {exc}"[:200]))
            continue
        status, problem = check_answer(res, ref, edit, k)
        a = Answer(c, ref, edit, took, status, problem)
        if status == "ok":
            a.hits, a.timings = hits_of(res), dict(res.get("timings") or {})
        out.append(a)


# -- a phase: n clients at once on one app ----------------------------------------------------------

def pct(xs: list[float], q: float) -> float:
    return round(float(np.percentile(xs, q)), 4) if xs else float("nan")


async def _phase(sessions: list[Session], plans: list[list[tuple[str, str]]], k: int,
                 scoring: str) -> tuple[list[Answer], float]:
    outs: list[list[Answer]] = [[] for _ in plans]
    t0 = time.perf_counter()
    await asyncio.gather(*(client_loop(s, c, plan, k, scoring, outs[c])
                           for c, (s, plan) in enumerate(zip(sessions, plans))))
    return [a for o in outs for a in o], time.perf_counter() - t0


def phase(app: App, fns: dict[str, int], n_clients: int, per_client: int, refs: list[str], tag: str,
          k: int, scoring: str) -> tuple[dict, list[Answer]]:
    """n_clients at once, each with per_client requests of its own; (the phase's line, its answers)."""
    plans = [[(refs[(c * 7919 + r * 104729 + len(tag)) % len(refs)], edit_for(tag, c, r)) for r in range(per_client)]
             for c in range(n_clients)]
    cores = os.cpu_count() or 1
    loop = asyncio.new_event_loop()
    sessions = [Session(app.url, fns) for _ in plans]  # before the clock: an httpx client's set-up is not a request
    try:
        app0, me0, (busy0, tot0) = app.cpu(), resource.getrusage(resource.RUSAGE_SELF), machine_jiffies()
        with LoadSampler() as load:
            got, wall = loop.run_until_complete(_phase(sessions, plans, k, scoring))
        me1, (busy1, tot1) = resource.getrusage(resource.RUSAGE_SELF), machine_jiffies()
    finally:
        for s in sessions:
            loop.run_until_complete(s.close())
        loop.run_until_complete(loop.shutdown_asyncgens())  # the event streams a reply left open
        loop.close()
    ok = [a for a in got if a.status == "ok"]
    lat = [a.latency_s for a in ok]
    stages = {s: pct([a.timings[s] for a in ok if s in a.timings], 50) for s in STAGES}
    outside = [a.latency_s * 1000 - a.timings["total"] for a in ok if "total" in a.timings]
    line = {"clients": n_clients, "requests": len(got), "ok": len(ok),
            **{s: sum(a.status == s for a in got) for s in ("busy", "error", "wrong", "failed")},
            "problems": sorted({a.problem for a in got if a.status != "ok"})[:3],
            "p50_s": pct(lat, 50), "p95_s": pct(lat, 95),
            "mean_s": round(statistics.fmean(lat), 4) if lat else float("nan"),
            "throughput_rps": round(len(ok) / wall, 3), "wall_s": round(wall, 2),
            "engine_ms_p50": stages, "outside_engine_ms_p50": pct(outside, 50),
            "client_cpu_share": round((me1.ru_utime + me1.ru_stime - me0.ru_utime - me0.ru_stime) / (wall * cores), 3),
            "app_cpu_share": round((app.cpu() - app0) / (wall * cores), 3),
            # robust to the share of the cores the app got on a busy machine: its work per answer
            "app_cpu_s_per_answer": round((app.cpu() - app0) / max(len(ok), 1), 4),
            "machine_busy_share": round((busy1 - busy0) / max(tot1 - tot0, 1), 3),
            "load_1m": load.summary()}
    return line, got


def refs_of(app: App, fns: dict[str, int], want: int = 64) -> list[str]:
    """Gallery ids to use as references: a first answer's hits, then theirs (any gallery works)."""
    async def crawl() -> list[str]:
        s = Session(app.url, fns)
        try:
            seen, frontier = [], ["test/000000", "v0000000"]
            while frontier and len(seen) < want:
                res, _ = await ask(s, frontier.pop(), "Add a star.", 8, "cosine")
                if "error" in res:
                    continue
                for m in res["methods"]:
                    for h in m["hits"]:
                        if h["item_id"] not in seen:
                            seen.append(h["item_id"])
                            frontier.append(h["item_id"])
            return seen
        finally:
            await s.close()

    seen = asyncio.run(crawl())
    if not seen:
        raise RuntimeError("no reference id answered")
    return seen


def verify(app: App, fns: dict[str, int], answers: list[Answer], k: int, scoring: str) -> dict:
    """Ask `answers` again, one at a time, of `app`: how many got the same top-k (`same_answer`)."""
    async def again() -> list[bool]:
        s = Session(app.url, fns)
        try:
            same = []
            for a in answers:
                res, _ = await ask(s, a.ref, a.edit, k, scoring)
                same.append(check_answer(res, a.ref, a.edit, k)[0] == "ok" and same_answer(a.hits, hits_of(res)))
            return same
        finally:
            await s.close()

    same = asyncio.run(again()) if answers else []
    return {"verified": len(same), "same": sum(same),
            "mixed_up": [(a.ref, a.edit[:40]) for a, ok in zip(answers, same) if not ok][:5]}


# -- a setup: both apps, ABBA ------------------------------------------------------------------------

def start_apps(setup: str, args: argparse.Namespace) -> dict[bool, App]:
    flags = prepare_vitb32(Path(args.work), args.n) if setup == "vitb32" else []
    apps = {}
    for batching in (True, False):
        env = {**os.environ, "CIR_BATCHING": "on" if batching else "off", "HF_HUB_OFFLINE": "1",
               "GRADIO_ANALYTICS_ENABLED": "False", "CIR_CACHE_DIR": args.cache_dir,
               "CIR_DB": str(Path(args.work) / f"db-{setup}-{int(batching)}.sqlite")}
        apps[batching] = App(flags + list(args.app_args), env,
                             Path(args.work) / f"app-{setup}-{'on' if batching else 'off'}.log")
    return apps


def run_setup(setup: str, args: argparse.Namespace, emit: Any) -> list[dict]:
    apps = start_apps(setup, args)
    lines: list[dict] = []
    try:
        for app in apps.values():
            app.wait()
        fns = asyncio.run(event_indices(apps[True].url))
        refs = refs_of(apps[False], fns)
        for b, app in apps.items():  # warm-up: methods built, thread pools up, start-up threads done
            phase(app, fns, 2, 3, refs, f"warm-{int(b)}", args.k, args.scoring)
            app.settle()
        sample: dict[bool, list[Answer]] = {True: [], False: []}
        rng = np.random.default_rng(0)
        for n in args.clients:
            for r in range(args.rounds):
                for batching in ((True, False) if r % 2 == 0 else (False, True)):
                    tag = f"{setup}-{'on' if batching else 'off'}-n{n}-r{r}"
                    per = max(args.per_client, -(-args.min_requests // n))  # a p95 of enough answers
                    line, got = phase(apps[batching], fns, n, per, refs, tag, args.k, args.scoring)
                    line.update(bench="load_compare", setup=setup, round=r, batching=batching,
                                scoring=args.scoring, k=args.k, date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
                    emit(line)
                    lines.append(line)
                    ok = [a for a in got if a.status == "ok"]
                    sample[batching] += [ok[i] for i in rng.choice(len(ok), min(args.verify, len(ok)), replace=False)]
        for batching, answers in sample.items():
            v = verify(apps[False], fns, answers, args.k, args.scoring)
            emit({"bench": "load_compare", "setup": setup, "verify_of_batching": batching,
                  "against": "batching off, one request at a time", **v})
        for line in summarise(setup, lines):
            emit(line)
        return lines
    finally:
        for app in apps.values():
            app.stop()


def summarise(setup: str, lines: list[dict]) -> list[dict]:
    """Per client count: the per-round ratios on / off, and at 16 clients the issue's two goals
    (throughput >= 2x unbatched; p95 <= 4x the one-client latency, batching on)."""
    out = []
    one = [l["p50_s"] for l in lines if l["clients"] == 1 and l["batching"]]
    for n in sorted({l["clients"] for l in lines}):
        rounds = sorted({l["round"] for l in lines if l["clients"] == n})
        by = {(l["round"], l["batching"]): l for l in lines if l["clients"] == n}
        tp = [by[r, True]["throughput_rps"] / by[r, False]["throughput_rps"] for r in rounds
              if (r, True) in by and (r, False) in by and by[r, False]["throughput_rps"] > 0]
        p95 = [by[r, True]["p95_s"] / by[r, False]["p95_s"] for r in rounds if (r, True) in by and (r, False) in by]
        row = {"bench": "load_compare_summary", "setup": setup, "clients": n, "rounds": len(rounds),
               "throughput_on_over_off": _spread(tp), "p95_on_over_off": _spread(p95),
               **{f"{key}_{'on' if b else 'off'}": _spread([by[r, b][key] for r in rounds if (r, b) in by])
                  for key in ("throughput_rps", "p50_s", "p95_s", "app_cpu_s_per_answer") for b in (True, False)}}
        cpu = [by[r, False]["app_cpu_s_per_answer"] / by[r, True]["app_cpu_s_per_answer"] for r in rounds
               if (r, True) in by and (r, False) in by and by[r, True]["app_cpu_s_per_answer"] > 0]
        row["app_cpu_per_answer_off_over_on"] = _spread(cpu)
        if n == 16 and one:
            p95_on = [by[r, True]["p95_s"] for r in rounds if (r, True) in by]
            row["goal_throughput_2x"] = bool(tp) and statistics.median(tp) >= 2.0
            row["p95_over_one_client_p50"] = round(statistics.median(p95_on) / statistics.median(one), 2)
            row["goal_p95_4x"] = row["p95_over_one_client_p50"] <= 4.0
        out.append(row)
    return out


def table(path: str) -> str:
    """The Markdown table of a results file's summary lines (medians, min-max over the rounds)."""
    rows = [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
    out = ["| setup | clients | p50 on / off (s) | p95 on / off (s) | throughput on / off (req/s) | "
           "throughput on/off | app CPU s per answer on / off |", "|---|---|---|---|---|---|---|"]
    fmt = lambda d, p=2: f"{d['median']:.{p}f} ({d['min']:.{p}f}–{d['max']:.{p}f})" if d else "—"  # noqa: E731
    for r in rows:
        if r.get("bench") != "load_compare_summary":
            continue
        out.append(f"| {r['setup']} | {r['clients']} | {fmt(r['p50_s_on'])} / {fmt(r['p50_s_off'])} | "
                   f"{fmt(r['p95_s_on'])} / {fmt(r['p95_s_off'])} | {fmt(r['throughput_rps_on'], 1)} / "
                   f"{fmt(r['throughput_rps_off'], 1)} | **{fmt(r['throughput_on_over_off'])}** | "
                   f"{fmt(r['app_cpu_s_per_answer_on'], 3)} / {fmt(r['app_cpu_s_per_answer_off'], 3)} |")
    return "\n".join(out)


def _spread(xs: list[float]) -> dict:
    if not xs:
        return {}
    return {"median": round(statistics.median(xs), 3), "min": round(min(xs), 3), "max": round(max(xs), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setup", default="world,vitb32", help="world, vitb32 (comma-separated)")
    ap.add_argument("--clients", default="1,4,16,32")
    ap.add_argument("--per-client", type=int, default=8, help="requests each client makes per phase")
    ap.add_argument("--min-requests", type=int, default=24, help="at least this many per phase (one client: 24)")
    ap.add_argument("--rounds", type=int, default=2, help="phases per (clients, batching), in ABBA order")
    ap.add_argument("--scoring", default="chord")
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--verify", type=int, default=8, help="answers per phase asked again of the unbatched app")
    ap.add_argument("--n", type=int, default=100_000, help="vectors in the vitb32 gallery")
    ap.add_argument("--work", default="/tmp/cir-load-compare")
    ap.add_argument("--out", help="append every JSON line to this file too")
    ap.add_argument("--cache-dir", default=os.environ.get("CIR_CACHE_DIR", str(Path.home() / ".cache" / "cir-workbench")))
    ap.add_argument("app_args", nargs="*", help="after --: extra flags for app.py")
    ap.add_argument("--table", metavar="JSONL", help="print the Markdown table of a results file and exit")
    args = ap.parse_args()
    if args.table:
        print(table(args.table))
        return
    args.clients = [int(c) for c in args.clients.split(",")]
    Path(args.work).mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    def emit(line: dict) -> None:
        text = json.dumps(line)
        print(text, flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(text + "\n")

    emit({"bench": "load_compare", "start": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "uptime": uptime(),
          "cores": os.cpu_count(), "args": {k: v for k, v in vars(args).items() if k != "cache_dir"}})
    for setup in args.setup.split(","):
        run_setup(setup, args, emit)
    emit({"bench": "load_compare", "end": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "uptime": uptime()})


if __name__ == "__main__":
    main()
