"""Calling a launched Gradio app's events the way the page does (queue/join + the SSE stream), so
a test can send payloads gradio_client would never build: a FileData naming a server path, a
private event by its index."""
from __future__ import annotations

import json
import uuid
from typing import Any

import httpx


def fn_index(demo: Any, *, api_name: str | None = None, fn_name: str | None = None) -> int:
    """The index of an event of `demo` by its api_name, or by its handler's function name."""
    for i, bf in demo.fns.items():
        if api_name is not None and bf.api_name == api_name:
            return i
        fn = getattr(bf.fn, "__wrapped__", bf.fn)
        if fn_name is not None and getattr(fn, "__name__", None) == fn_name:
            return i
    raise KeyError(api_name or fn_name)


def call(url: str, index: int, data: list, cookies: Any = None, timeout: float = 120.0,
         session: str | None = None) -> dict:
    """Run event `index` with the raw `data` (in the session `session`, default a new one; a
    gr.State input is sent as None: Gradio reads the session's own); returns the
    `process_completed` message (`{"success": bool, "output": {"data": [...]} or {"error": ...}}`)."""
    session = session or uuid.uuid4().hex[:11]
    base = url.rstrip("/") + "/gradio_api"
    with httpx.Client(timeout=timeout, cookies=cookies) as c:
        r = c.post(f"{base}/queue/join", json={"data": data, "event_data": None, "fn_index": index,
                                               "trigger_id": None, "session_hash": session})
        r.raise_for_status()
        with c.stream("GET", f"{base}/queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                msg = json.loads(line[5:])
                if msg.get("msg") == "process_completed":
                    return msg
    raise RuntimeError("the event never completed")


def file_data(path: str) -> dict:
    """A FileData payload naming `path` on the server (what a crafted request would send)."""
    return {"path": path, "meta": {"_type": "gradio.FileData"}, "orig_name": path.rsplit("/", 1)[-1]}


def sign_in(url: str, name: str, password: str) -> httpx.Cookies:
    """The cookies of a signed-in session (Gradio's login route)."""
    r = httpx.post(url.rstrip("/") + "/login", data={"username": name, "password": password})
    r.raise_for_status()
    return r.cookies
