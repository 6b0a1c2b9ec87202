"""The app's HTTP surface rules, as one ASGI middleware in front of Gradio (`HttpGuard`).

Gradio's own routes trust more than a multi-user annotation service may (issue 42):

- **Cross-site requests.** `/login` accepted a form POSTed from another origin, so a page anywhere
  could sign a visitor's browser in as the attacker (and their answers were then stored under the
  attacker's name). Every state-changing request (POST, PUT, PATCH, DELETE) whose `Origin` (or,
  without one, `Referer`) names another site is refused with 403. Requests without either come
  from programs, not from a browser page, and carry no victim's cookies.
- **Sessions belong to their user.** Gradio keys a screen's event stream and state by the
  session hash the request names, whoever sends it: `GET /gradio_api/queue/data?session_hash=X`
  with one's own cookie received another user's replies (and their click then hung). The first
  request that names a session hash binds it to the signed-in user (or to "nobody" in an app
  without sign-in); a request from anyone else naming it is refused with 403 and reaches nothing.
- **Uploads are bounded.** In annotation-only mode the app takes no uploads at all; elsewhere
  each request has a size cap (one image), each user (or client address) a count and byte quota
  per hour and a rate per minute, and the disk a free-space floor — a signed-in user could fill
  the disk the annotation database lives on in seconds (8 x 24 MB in one second, kept an hour).
- **Every page has a title.** Gradio's page carries none until the app's config loads, so its
  sign-in page had no `<title>` (axe: document-title, serious); an HTML page without one gets
  the app's (`PAGE_TITLE`).
- **Exports belong to their owner.** A folder made for one user's download (`TEMP.new(..., owner)`)
  is served to that user only; anyone else gets 404, as for a file that does not exist.

The signed-in user is read the way Gradio reads it (its token cookie, `app.tokens`) or from the
Hugging Face OAuth session, and named as the handlers name it (`ui.annotate.user_of`).
"""
from __future__ import annotations

import json
import logging
import shutil
import threading
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any, Awaitable, Callable

from cir_core.memo import LRU

from .tempfiles import TEMP

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
MAX_JSON_BODY = 25 * 1024 * 1024  # a queue/join or cancel body is read whole to find its session hash
SESSION_PATHS = ("/gradio_api/heartbeat/", "/gradio_api/stream/")  # .../<session_hash>/...
NOBODY = "\x00nobody"  # the owner of a session opened without sign-in
PAGE_TITLE = "CIR Workbench"
MAX_PAGE = 1024 * 1024  # HTML pages read whole to give them a title: Gradio's is a few kB


@dataclass(frozen=True)
class UploadLimits:
    """What one user may upload (docs/APP.md, "Limits"). Per user = per signed-in name, or per
    client address in an app without sign-in."""

    max_request_bytes: int = 25 * 1024 * 1024 + 64 * 1024  # one 25 MB image and its multipart framing
    per_minute: int = 20
    per_hour: int = 200
    bytes_per_hour: int = 500 * 1024 * 1024
    min_free_bytes: int = 1024 * 1024 * 1024  # keep 1 GiB free where uploads land (the DB may share the disk)


class UploadQuota:
    """Sliding-window counts of uploads per user (thread-safe; in memory, per process)."""

    def __init__(self, limits: UploadLimits, clock: Callable[[], float] = time.monotonic, max_users: int = 100_000):
        self.limits, self.clock, self.max_users = limits, clock, max_users
        self._seen: dict[str, deque[tuple[float, int]]] = {}
        self._lock = threading.Lock()

    def admit(self, who: str, size: int) -> tuple[int, str] | None:
        """None if `who` may upload `size` more bytes now (and it is counted), else (HTTP status,
        message) — 429 with the quota that was reached."""
        lim, now = self.limits, self.clock()
        with self._lock:
            if len(self._seen) >= self.max_users and who not in self._seen:
                self._prune(now)
            q = self._seen.setdefault(who, deque())
            while q and now - q[0][0] > 3600:
                q.popleft()
            last_minute = sum(1 for t, _ in q if now - t <= 60)
            if last_minute >= lim.per_minute:
                return 429, f"upload rate limit: {lim.per_minute} a minute; try again in a minute"
            if len(q) >= lim.per_hour:
                return 429, f"upload limit: {lim.per_hour} files an hour"
            if sum(n for _, n in q) + size > lim.bytes_per_hour:
                return 429, f"upload limit: {lim.bytes_per_hour // 2**20} MB an hour"
            q.append((now, size))
        return None

    def _prune(self, now: float) -> None:
        for k in [k for k, q in self._seen.items() if not q or now - q[-1][0] > 3600]:
            del self._seen[k]


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in scope.get("headers") or ():
        out.setdefault(k.decode("latin-1").lower(), v.decode("latin-1"))
    return out


def _netloc(url: str, scheme_default: str = "http") -> str | None:
    """host[:port] of an Origin/Referer value, default ports dropped; None if it names none."""
    try:
        u = urllib.parse.urlsplit(url)
        if not u.hostname:
            return None
        port = u.port
    except ValueError:
        return None
    host = u.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(u.scheme or scheme_default)
    return host if port in (None, default) else f"{host}:{port}"


def _host_netloc(host: str) -> str | None:
    return _netloc(f"http://{host}") if host else None


def same_origin(headers: dict[str, str], allowed: frozenset[str]) -> bool:
    """Whether a state-changing request may come from where its Origin/Referer says: this host,
    one of the `allowed` extra origins (host[:port]), or no browser page at all."""
    source = headers.get("origin")
    if source is None:
        source = headers.get("referer")
        if source is None:
            return True  # a program (curl, gradio_client), not a page: no ambient cookies to abuse
    if source.strip().lower() == "null":
        return False  # sandboxed frames, file:// pages, redirects across sites
    src = _netloc(source.strip())
    host = _host_netloc(headers.get("host", ""))
    return src is not None and (src == host or src in allowed)


def principal(scope: Scope, headers: dict[str, str]) -> str | None:
    """The signed-in user as the handlers name them: Gradio's sign-in name, 'hf:<username>' from
    Hugging Face OAuth, or None."""
    app = scope.get("app")
    tokens, cookie_id = getattr(app, "tokens", None), getattr(app, "cookie_id", None)
    if isinstance(tokens, dict) and cookie_id and "cookie" in headers:
        jar = SimpleCookie()
        try:
            jar.load(headers["cookie"])
        except Exception:  # a malformed cookie header: nobody
            jar = SimpleCookie()
        for name in (f"access-token-{cookie_id}", f"access-token-unsecure-{cookie_id}"):
            if name in jar and jar[name].value in tokens:
                return str(tokens[jar[name].value])
    session = scope.get("session")
    info = session.get("oauth_info") if isinstance(session, dict) else None
    user = (info or {}).get("userinfo", {}).get("preferred_username") if isinstance(info, dict) else None
    return f"hf:{user}" if isinstance(user, str) and user else None


async def _reply(send: Send, status: int, message: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"detail": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
                + (extra or [])})
    await send({"type": "http.response.body", "body": body})


class HttpGuard:
    """ASGI middleware applying the module's rules (pass its options through starlette's
    `Middleware(HttpGuard, ...)`)."""

    def __init__(self, app: Any, annotation_only: bool = False, allowed_origins: tuple[str, ...] = (),
                 limits: UploadLimits = UploadLimits(), quota: UploadQuota | None = None,
                 owners: LRU[str, str] | None = None):
        self.app, self.annotation_only = app, annotation_only
        self.allowed = frozenset(n for n in (_netloc(o) for o in allowed_origins) if n)
        self.limits = limits
        self.quota = quota or UploadQuota(limits)
        self.owners: LRU[str, str] = owners if owners is not None else LRU(200_000)
        self._bind = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers, method, path = _headers(scope), scope.get("method", "GET"), scope.get("path", "")
        if method in UNSAFE and not same_origin(headers, self.allowed):
            log.warning("refused a cross-site %s %s from %s", method, path, headers.get("origin") or headers.get("referer"))
            await _reply(send, 403, "cross-site request refused")
            return
        user = principal(scope, headers)
        if method == "POST" and path.endswith("/gradio_api/upload"):
            refusal = self._upload(scope, headers, user)
            if refusal is not None:
                await _reply(send, *refusal)
                return
        if method == "GET" and "/gradio_api/file=" in path and not self._may_read(path, user):
            await _reply(send, 404, "file not found")
            return
        if method == "GET" and not path.startswith("/gradio_api/"):
            send = _titled(send)
        hashes = self._hashes_in_url(scope, path)
        if method == "POST" and path.startswith("/gradio_api/") and \
                headers.get("content-type", "").split(";")[0].strip() == "application/json":
            body, receive = await self._read_body(receive)
            if body is None:
                await _reply(send, 413, "request body too large")
                return
            hashes += self._hash_in_json(body)
        for h in hashes:
            if not self._owns(h, user):
                log.warning("refused %s %s: session %r belongs to another user (request by %r)",
                            method, path, h[:16], user)
                await _reply(send, 403, "this session belongs to another user")
                return
        await self.app(scope, receive, send)

    # -- sessions ------------------------------------------------------------------------------------

    def _owns(self, session_hash: str, user: str | None) -> bool:
        """Bind `session_hash` to `user` on first sight; afterwards only that user may name it."""
        who = user if user is not None else NOBODY
        with self._bind:
            owner = self.owners.get(session_hash)
            if owner is None:
                self.owners.put(session_hash, who)
                return True
        return owner == who

    @staticmethod
    def _hashes_in_url(scope: Scope, path: str) -> list[str]:
        out = []
        query = urllib.parse.parse_qs((scope.get("query_string") or b"").decode("latin-1"))
        out += [h for h in query.get("session_hash", []) if h]
        for prefix in SESSION_PATHS:
            if path.startswith(prefix):
                seg = path[len(prefix):].split("/", 1)[0]
                if seg:
                    out.append(seg)
        return out

    @staticmethod
    def _hash_in_json(body: bytes) -> list[str]:
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            return []  # Gradio answers the malformed body itself
        h = data.get("session_hash") if isinstance(data, dict) else None
        return [h] if isinstance(h, str) and h else []

    async def _read_body(self, receive: Receive) -> tuple[bytes | None, Receive]:
        """The whole body (None past MAX_JSON_BODY) and a `receive` that replays it."""
        chunks, size, more = [], 0, True
        while more:
            msg = await receive()
            if msg["type"] != "http.request":
                return b"".join(chunks), _replay([msg])
            chunks.append(msg.get("body", b""))
            size += len(chunks[-1])
            if size > MAX_JSON_BODY:
                return None, receive
            more = msg.get("more_body", False)
        body = b"".join(chunks)
        return body, _replay([{"type": "http.request", "body": body, "more_body": False}], receive)

    # -- uploads and files ---------------------------------------------------------------------------

    def _upload(self, scope: Scope, headers: dict[str, str], user: str | None) -> tuple[int, str] | None:
        if self.annotation_only:
            return 403, "uploads are off in annotation-only mode"
        length = headers.get("content-length")
        if length is None or not length.isdigit():
            return 411, "an upload needs a Content-Length"
        size = int(length)
        if size > self.limits.max_request_bytes:
            return 413, f"an upload may be at most {self.limits.max_request_bytes // 2**20} MB"
        try:
            free = shutil.disk_usage(TEMP.gradio_dir()).free
        except OSError:
            free = 0
        if free - size < self.limits.min_free_bytes:
            log.error("upload refused: %d MB free where uploads land (floor %d MB)", free // 2**20,
                      self.limits.min_free_bytes // 2**20)
            return 507, "the server is short of disk space: uploads are paused"
        client = scope.get("client")
        who = user if user is not None else f"addr:{client[0] if client else 'unknown'}"
        return self.quota.admit(who, size)

    @staticmethod
    def _may_read(path: str, user: str | None) -> bool:
        target = urllib.parse.unquote(path.split("/gradio_api/file=", 1)[1])
        owner = TEMP.owner_of(target)
        return owner is None or owner == user


def _titled(send: Send) -> Send:
    """`send`, with an HTML page that has no <title> given `PAGE_TITLE` (other replies untouched)."""
    state: dict[str, Any] = {"start": None, "chunks": []}

    async def wrapped(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = {k.lower(): v for k, v in message.get("headers", [])}
            length = headers.get(b"content-length", b"")
            if headers.get(b"content-type", b"").startswith(b"text/html") and length.isdigit() and \
                    int(length) <= MAX_PAGE:  # a streamed page (no length) passes as it is
                state["start"] = message  # held until the body is whole
                return
            await send(message)
            return
        if message["type"] != "http.response.body" or state["start"] is None:
            await send(message)
            return
        state["chunks"].append(message.get("body", b""))
        if message.get("more_body", False):
            return
        body = b"".join(state["chunks"])
        if b"<title" not in body.lower() and b"<head>" in body:
            body = body.replace(b"<head>", f"<head><title>{PAGE_TITLE}</title>".encode(), 1)
        start = state["start"]
        start["headers"] = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"] + \
            [(b"content-length", str(len(body)).encode())]
        await send(start)
        await send({"type": "http.response.body", "body": body, "more_body": False})

    return wrapped


def _replay(messages: list[dict[str, Any]], then: Receive | None = None) -> Receive:
    pending = list(messages)

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop(0)
        if then is not None:
            return await then()
        return {"type": "http.disconnect"}

    return receive
