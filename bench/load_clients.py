"""The load benchmark's simulated annotators (bench/load_annotation.py): one signed-in session
each, clicking the Annotate tab's events with think times, skips and Back + change, recording
everything it saw and every acknowledged write.

All of them run as asyncio tasks in ONE process, each with its own httpx client (its own
sign-in cookie and Gradio session), speaking the page's own protocol: POST
`gradio_api/queue/join`, then read the event's result off `gradio_api/queue/data` (server-sent
events). gradio_client costs far more CPU per click (a thread and a poll per job): four processes
of it took ~40 % of a core each and measured their own queueing (issue 27). Here the clients'
CPU share is reported beside every figure."""
from __future__ import annotations

import asyncio
import json
import os
import random
import re
import time
import uuid
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
    # 0: the one client process needs ~10 % of a core, and at nice 10 on a machine whose other
    # processes run at nice 0 it waited for the CPU before reading each reply: it measured itself.
    client_nice: int = 0
    kill: bool = True
    seed: int = 0
    app_args: list[str] = field(default_factory=list)  # extra flags for app.py


# -- the page's protocol ----------------------------------------------------------------------------

class Session:
    """One signed-in browser session: its cookies, its Gradio session hash, the events by name."""

    def __init__(self, url: str, fns: dict[str, int]):
        import httpx

        self.url, self.fns = url, fns
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=15.0))
        self.hash = uuid.uuid4().hex[:11]

    async def sign_in(self, name: str, password: str) -> None:
        r = await self.http.post(self.url + "login", data={"username": name, "password": password})
        r.raise_for_status()
        self.hash = uuid.uuid4().hex[:11]  # a new page after a sign-in

    async def call(self, api: str, *data: Any, state: bool = True) -> list:
        """Run event `api` (with `state`, its first input is a gr.State, sent as None: the server
        holds it); its outputs. Raises on any failure (refused connection, a dropped stream, an
        error reply)."""
        base = self.url + "gradio_api"
        r = await self.http.post(f"{base}/queue/join", json={
            "data": [None, *data] if state else list(data), "event_data": None, "fn_index": self.fns[api.lstrip("/")],
            "trigger_id": None, "session_hash": self.hash})
        r.raise_for_status()
        event = r.json().get("event_id")
        async with self.http.stream("GET", f"{base}/queue/data", params={"session_hash": self.hash}) as s:
            s.raise_for_status()
            async for line in s.aiter_lines():
                if not line.startswith("data:"):
                    continue
                msg = json.loads(line[5:])
                if msg.get("msg") == "process_completed" and msg.get("event_id", event) == event:
                    if not msg.get("success"):
                        raise RuntimeError(f"{api}: {str(msg.get('output'))[:200]}")
                    return msg["output"]["data"]
        raise ConnectionError(f"{api}: the event stream ended before the reply")

    async def close(self) -> None:
        await self.http.aclose()


async def event_indices(url: str, user: tuple[str, str] | None = None) -> dict[str, int]:
    """api_name -> fn_index of the app's events (from its config, read once, signed in as `user`
    where the app has sign-in)."""
    import httpx

    async with httpx.AsyncClient(timeout=60.0) as c:
        if user is not None:
            (await c.post(url + "login", data={"username": user[0], "password": user[1]})).raise_for_status()
        cfg = (await c.get(url + "config")).json()
    return {d["api_name"]: d["id"] for d in cfg["dependencies"] if d.get("api_name")}


# -- one annotator ----------------------------------------------------------------------------------

POS = re.compile(r"pair #(\d+)")
# The saved answer as the status says it, in the buttons' words ("your answer: **Can't tell ·
# Not satisfied**", ui.annotate.answer_words), read back into codes ("cant_tell / no").
ANSWER = re.compile(r"your answer: \*\*(skipped|[^*·]+ · [^*·]+)\*\*")


def answer_codes(words: str) -> str:
    """'skipped', or 'identity / edit' codes of a status's saved answer."""
    if words == "skipped":
        return words
    from db.questions import value_of  # the buttons' own words, declared once

    ident, edit = (w.strip() for w in words.split("·"))
    return f"{value_of(ident) or ident} / {value_of(edit) or edit}"


def _status(out: Any) -> str:
    s = out[0] if isinstance(out, (list, tuple)) else out
    return re.sub(r"\\(.)", r"\1", s or "")  # the Markdown escapes off


class Annotator:
    """One signed-in session; everything it saw, in `rec` (JSON-serialisable)."""

    def __init__(self, k: int, name: str, password: str, url: str, fns: dict[str, int], cfg: LoadConfig,
                 acked: Any):
        self.k, self.name, self.password, self.url, self.cfg, self.acked = k, name, password, url, cfg, acked
        self.fns = fns
        self.rng = random.Random(cfg.seed * 10_000 + k)
        self.session: Session | None = None
        self.pos: int | None = None
        self.shown_answer: str | None = None
        self.writes = 0
        self.rec: dict[str, Any] = {"name": name, "clicks": [], "acks": [], "unacked": [], "resumes": [],
                                    "read_back": [], "errors": [], "finished": False}

    async def connect(self) -> None:
        if self.session is not None:
            await self.session.close()
        self.session = Session(self.url, self.fns)
        await self.session.sign_in(self.name, self.password)

    async def _click(self, api: str, *args: Any, kind: str) -> Any | None:
        """One click; None if it failed (the app went away): the caller then resumes."""
        t0 = time.monotonic()
        try:
            out = await self.session.call(api, *args)
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
        self.shown_answer = answer_codes(a.group(1)) if a else None
        if "Nothing left" in st:
            self.pos = None

    async def resume(self, in_flight: dict | None) -> None:
        """Sign in again until the app answers, press Next, check where the queue resumed."""
        deadline = time.monotonic() + RESUME_TIMEOUT_S
        attempt = 0
        while True:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the app did not come back within {RESUME_TIMEOUT_S} s")
            # Exponential backoff with jitter, as a browser's reconnect does: 32 sessions
            # retrying every second would keep a restarting app busy with sign-ins.
            await asyncio.sleep(min(0.5 * 2 ** attempt, 8.0) * (0.5 + self.rng.random()))
            attempt += 1
            try:
                await self.connect()
            except Exception:
                continue
            out = await self._click("/annotate_next", kind="resume")
            if out is not None:
                break
        before = in_flight["position"] if in_flight else None
        self._screen(out)
        ok = in_flight is None or self.pos in (before, None) or (
            in_flight.get("kind") == "answer" and in_flight.get("revision") and self.pos is not None) or (
            self.pos is not None and before is not None and self.pos == before + 1)
        self.rec["resumes"].append({"t": round(time.monotonic(), 3), "in_flight_position": before,
                                    "resumed_at": self.pos, "ok": bool(ok)})

    async def _think(self) -> None:
        await asyncio.sleep(self.cfg.think_s * (0.5 + self.rng.random()))

    async def _write(self, kind: str, revision: bool = False) -> bool:
        """Answer or skip the pair on screen: True once acknowledged."""
        pos = self.pos
        self.writes += 1
        comment = f"{self.name} w{self.writes} p{pos}"
        if kind == "skip":
            reason = self.rng.choice(SKIP_REASONS)
            payload = {"position": pos, "status": "skipped", "identity": None, "edit": None,
                       "skip_reason": reason, "comment": None, "revision": revision, "kind": kind}
            await self._think()
            out = await self._click("/annotate_skip", reason, kind="skip")
        else:
            ident, edit = self.rng.choice(IDENTITY), self.rng.choice(EDIT)
            payload = {"position": pos, "status": "answered", "identity": ident, "edit": edit,
                       "skip_reason": None, "comment": comment, "revision": revision, "kind": kind}
            await self._think()
            out = await self._click(f"/annotate_identity_{ident}", comment, kind="first-label")
            if out is None:
                self.rec["unacked"].append({**payload, "t": round(time.monotonic(), 3), "sent": False})
                await self.resume({**payload, "sent": False})
                return False
            await self._think()
            out = await self._click(f"/annotate_edit_{edit}", comment, kind="save")
        if out is None:
            self.rec["unacked"].append({**payload, "t": round(time.monotonic(), 3), "sent": True})
            await self.resume(payload)
            return False
        self.rec["acks"].append({**payload, "t": round(time.monotonic(), 3)})
        self._screen(out)
        return True

    async def _back_and_change(self) -> None:
        """Back: the previous pair must show the answer saved for it; then change it."""
        await self._think()
        out = await self._click("/annotate_back", kind="back")
        if out is None:
            await self.resume(None)
            return
        self._screen(out)
        saved = [a for a in self.rec["acks"] if a["position"] == self.pos]
        want = None if not saved else ("skipped" if saved[-1]["status"] == "skipped"
                                       else f"{saved[-1]['identity']} / {saved[-1]['edit']}")
        self.rec["read_back"].append({"position": self.pos, "shown": self.shown_answer, "saved": want})
        if self.pos is not None:
            await self._write("answer", revision=True)  # change it: the audit keeps the old one

    async def run(self) -> None:
        try:
            out = None
            try:
                await self.connect()
                out = await self._click("/annotate_next", kind="open")
            except Exception as exc:  # the sign-in itself failed (32 arriving at once)
                self.rec["errors"].append([round(time.monotonic(), 3), "connect", type(exc).__name__, str(exc)[:120]])
            if out is None:
                await self.resume(None)
            else:
                self._screen(out)
            first = 0
            while first < self.cfg.judgments and self.pos is not None:
                kind = "skip" if self.rng.random() < self.cfg.p_skip else "answer"
                at = self.pos
                if not await self._write(kind):
                    continue  # resumed: the same pair again, or the next if the write had committed
                first += 1
                with self.acked.get_lock():
                    self.acked.value += 1
                if kind == "answer" and self.rng.random() < self.cfg.p_back and at > 1:
                    await self._back_and_change()
            self.rec["finished"] = True
        except Exception as exc:  # a bug in the benchmark or the app: reported, never hidden
            self.rec["errors"].append([round(time.monotonic(), 3), "fatal", type(exc).__name__, str(exc)[:300]])
        finally:
            if self.session is not None:
                await self.session.close()


async def _all(users: list[tuple[str, str]], url: str, cfg: LoadConfig, acked: Any, out_dir: str) -> None:
    fns = await event_indices(url, users[0])
    annotators = [Annotator(k, *users[k], url, fns, cfg, acked) for k in range(len(users))]
    tasks = []
    for a in annotators:
        tasks.append(asyncio.create_task(a.run()))
        await asyncio.sleep(0.25 + 0.5 * random.random())  # people do not all sign in in the same second
    await asyncio.gather(*tasks)
    for a in annotators:
        Path(out_dir, f"client-{a.k}.json").write_text(json.dumps(a.rec))


def client_worker(users: list[tuple[str, str]], url: str, cfg: LoadConfig, acked: Any, out_dir: str) -> None:
    """Every annotator, in this one process (at nice `client_nice`, 0 by default: see LoadConfig)."""
    os.nice(cfg.client_nice)
    asyncio.run(_all(users, url, cfg, acked, out_dir))
