"""The load benchmark's simulated annotators (bench/load_annotation.py): one signed-in
gradio_client session each, clicking the Annotate tab's events with think times, skips and
Back + change, recording everything it saw and every acknowledged write."""
from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

IDENTITY = ("yes", "no", "cant_tell")
EDIT = ("yes", "partial", "no")
SKIP_REASONS = ("reference unclear", "candidate unclear", "edit text unclear", "other")
SET = "load"
RESUME_TIMEOUT_S = 1200.0


@dataclass
class LoadConfig:
    clients: int = 32
    judgments: int = 40          # first answers (or skips) per annotator
    think_s: float = 2.0         # mean pause before a click
    p_skip: float = 0.08
    p_back: float = 0.08
    kill_at: float = 0.5         # SIGKILL once this fraction of the planned first answers is acked
    down_s: float = 1.0
    queries: int = 200           # pooled into the benchmark's own set
    overlap: int = 2
    procs: int = 4
    client_nice: int = 10
    kill: bool = True
    seed: int = 0
    app_args: list[str] = field(default_factory=list)  # extra flags for app.py


# -- one annotator ----------------------------------------------------------------------------------

POS = re.compile(r"pair #(\d+)")
ANSWER = re.compile(r"your answer: (skipped|[a-z_]+ / [a-z_]+)")


def _status(out: Any) -> str:
    s = out[0] if isinstance(out, (list, tuple)) else out
    return re.sub(r"\\(.)", r"\1", s or "")  # the Markdown escapes off


class Annotator:
    """One signed-in session; everything it saw, in `rec` (JSON-serialisable)."""

    def __init__(self, k: int, name: str, password: str, url: str, cfg: LoadConfig, acked: Any):
        self.k, self.name, self.password, self.url, self.cfg, self.acked = k, name, password, url, cfg, acked
        self.rng = random.Random(cfg.seed * 10_000 + k)
        self.client: Any = None
        self.pos: int | None = None
        self.shown_answer: str | None = None
        self.writes = 0
        self.rec: dict[str, Any] = {"name": name, "clicks": [], "acks": [], "unacked": [], "resumes": [],
                                    "read_back": [], "errors": [], "finished": False}

    def connect(self) -> None:
        from gradio_client import Client

        self.client = Client(self.url, auth=(self.name, self.password), verbose=False, download_files=False)

    def _click(self, api: str, *args: Any, kind: str) -> Any | None:
        """One click; None if it failed (the app went away): the caller then resumes."""
        t0 = time.monotonic()
        try:
            out = self.client.predict(*args, api_name=api)
        except Exception as exc:  # connection refused/reset, session gone: the outage
            self.rec["errors"].append([round(t0, 3), api, type(exc).__name__, str(exc)[:120]])
            return None
        self.rec["clicks"].append([kind, round(t0, 4), round(time.monotonic() - t0, 4)])
        return out

    def _screen(self, out: Any) -> None:
        st = _status(out)
        m = POS.search(st)
        self.pos = int(m.group(1)) if m else None
        a = ANSWER.search(st)
        self.shown_answer = a.group(1) if a else None
        if "Nothing left" in st:
            self.pos = None

    def resume(self, in_flight: dict | None) -> None:
        """Sign in again until the app answers, press Next, check where the queue resumed."""
        deadline = time.monotonic() + RESUME_TIMEOUT_S
        attempt = 0
        while True:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the app did not come back within {RESUME_TIMEOUT_S} s")
            # Exponential backoff with jitter, as a browser's reconnect does: 32 sessions
            # retrying every second would keep a restarting app busy with sign-ins.
            time.sleep(min(0.5 * 2 ** attempt, 8.0) * (0.5 + self.rng.random()))
            attempt += 1
            try:
                self.connect()
            except Exception:
                continue
            out = self._click("/annotate_next", kind="resume")
            if out is not None:
                break
        before = in_flight["position"] if in_flight else None
        self._screen(out)
        ok = in_flight is None or self.pos in (before, None) or (
            in_flight.get("kind") == "answer" and in_flight.get("revision") and self.pos is not None) or (
            self.pos is not None and before is not None and self.pos == before + 1)
        self.rec["resumes"].append({"t": round(time.monotonic(), 3), "in_flight_position": before,
                                    "resumed_at": self.pos, "ok": bool(ok)})

    def _think(self) -> None:
        time.sleep(self.cfg.think_s * (0.5 + self.rng.random()))

    def _write(self, kind: str, revision: bool = False) -> bool:
        """Answer or skip the pair on screen: True once acknowledged."""
        pos = self.pos
        self.writes += 1
        comment = f"{self.name} w{self.writes} p{pos}"
        if kind == "skip":
            reason = self.rng.choice(SKIP_REASONS)
            payload = {"position": pos, "status": "skipped", "identity": None, "edit": None,
                       "skip_reason": reason, "comment": None, "revision": revision, "kind": kind}
            self._think()
            out = self._click("/annotate_skip", reason, kind="skip")
        else:
            ident, edit = self.rng.choice(IDENTITY), self.rng.choice(EDIT)
            payload = {"position": pos, "status": "answered", "identity": ident, "edit": edit,
                       "skip_reason": None, "comment": comment, "revision": revision, "kind": kind}
            self._think()
            out = self._click(f"/annotate_identity_{ident}", comment, kind="first-label")
            if out is None:
                self.rec["unacked"].append({**payload, "t": round(time.monotonic(), 3), "sent": False})
                self.resume({**payload, "sent": False})
                return False
            self._think()
            out = self._click(f"/annotate_edit_{edit}", comment, kind="save")
        if out is None:
            self.rec["unacked"].append({**payload, "t": round(time.monotonic(), 3), "sent": True})
            self.resume(payload)
            return False
        self.rec["acks"].append({**payload, "t": round(time.monotonic(), 3)})
        self._screen(out)
        return True

    def run(self) -> None:
        try:
            out = None
            try:
                self.connect()
                out = self._click("/annotate_next", kind="open")
            except Exception as exc:  # the sign-in itself timed out (32 arriving at once)
                self.rec["errors"].append([round(time.monotonic(), 3), "connect", type(exc).__name__, str(exc)[:120]])
            if out is None:
                self.resume(None)
            else:
                self._screen(out)
            first = 0
            while first < self.cfg.judgments and self.pos is not None:
                kind = "skip" if self.rng.random() < self.cfg.p_skip else "answer"
                at = self.pos
                if not self._write(kind):
                    continue  # resumed: the same pair again, or the next if the write had committed
                first += 1
                with self.acked.get_lock():
                    self.acked.value += 1
                if kind == "answer" and self.rng.random() < self.cfg.p_back and at > 1:
                    self._think()
                    out = self._click("/annotate_back", kind="back")
                    if out is None:
                        self.resume(None)
                        continue
                    self._screen(out)
                    saved = [a for a in self.rec["acks"] if a["position"] == self.pos]
                    want = None if not saved else ("skipped" if saved[-1]["status"] == "skipped"
                                                   else f"{saved[-1]['identity']} / {saved[-1]['edit']}")
                    self.rec["read_back"].append({"position": self.pos, "shown": self.shown_answer,
                                                  "saved": want})
                    if self.pos is not None:
                        self._write("answer", revision=True)  # change it: the audit keeps the old one
            self.rec["finished"] = True
        except Exception as exc:  # a bug in the benchmark or the app: reported, never hidden
            self.rec["errors"].append([round(time.monotonic(), 3), "fatal", type(exc).__name__, str(exc)[:300]])


def client_worker(ks: list[int], users: list[tuple[str, str]], url: str, cfg: LoadConfig, acked: Any,
            out_dir: str) -> None:
    # The sessions stand in for browsers on other machines: they yield the CPU to the app
    # (and to everything else on this shared machine) instead of competing with it.
    os.nice(cfg.client_nice)
    annotators = [Annotator(k, *users[k], url, cfg, acked) for k in ks]
    threads = []
    for a in annotators:
        th = threading.Thread(target=a.run, daemon=True)
        th.start()
        threads.append(th)
        time.sleep(0.25 + 0.5 * random.random())  # people do not all sign in in the same second
    for th in threads:
        th.join()
    for a in annotators:
        Path(out_dir, f"client-{a.k}.json").write_text(json.dumps(a.rec))
