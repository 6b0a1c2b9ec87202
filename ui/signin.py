"""Sign-in for a locally run app: the annotators file checked by Gradio's login page, throttled.

Gradio calls `auth(username, password)` from its `/login` route without the request, so a small
ASGI middleware (`ClientAddress`) records each request's client address in a context variable
that the check reads. The check is a coroutine: Gradio awaits it, so a throttled attempt sleeps
without holding up any other request. Every failure is logged (name, client address, how many
recent failures, whether it is now locked) at WARNING on the `ui.signin` logger; the password
never is. Policy: `db.users.SignInThrottle`.

The client address is the connection's peer, unless the peer is one of the proxies named in
`--trusted-proxies` (`trust_proxies`), whose X-Forwarded-For then names the client. uvicorn
trusts the header from 127.0.0.1 by default: any local process could rotate it to escape the
per-address limit and be logged under a forged address. If every request arrives from one
proxy that is not trusted, the per-address limit counts all users together, so it is set well
above the per-name one.
"""
from __future__ import annotations

import asyncio
import contextvars
import logging
import os
from pathlib import Path
from typing import Any, Awaitable, Callable

from db.users import SignInThrottle, checker

log = logging.getLogger(__name__)

CLIENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("cir_client_address", default=None)


class ClientAddress:
    """ASGI middleware: the client's address of each HTTP request, in `CLIENT`."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        token = CLIENT.set(str(client[0]) if client else None)
        try:
            await self.app(scope, receive, send)
        finally:
            CLIENT.reset(token)


def throttled(check: Callable[[str, str], bool], throttle: SignInThrottle,
              sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> Callable[[str, str], Awaitable[bool]]:
    """Gradio's `auth=` coroutine: `check` behind `throttle`."""

    async def auth(username: str, password: str) -> bool:
        name = username if isinstance(username, str) else ""
        shown = name.strip()[:80]
        addr = CLIENT.get() or "unknown"
        attempt = throttle.begin(name, addr)
        if attempt.delay:
            await sleep(attempt.delay)
        if attempt.locked:
            log.warning("sign-in refused for %r from %s: %s", shown, addr, attempt.reason)
            return False
        if check(name, password if isinstance(password, str) else ""):
            throttle.success(name, addr)
            log.info("signed in: %r from %s", shown, addr)
            return True
        n_name, n_addr = throttle.failures(name, addr)
        log.warning("sign-in failed for %r from %s (%d recent failures on the name, %d from the "
                    "address; answered after %.1f s)", shown, addr, n_name, n_addr, attempt.delay)
        return False

    return auth


def trust_proxies(proxies: list[str]) -> None:
    """X-Forwarded-For honoured only from `proxies` (addresses or networks; empty: from nobody).
    uvicorn reads FORWARDED_ALLOW_IPS when Gradio builds its server config, at launch: call
    this before `demo.launch`. Replaces what the environment had there."""
    os.environ["FORWARDED_ALLOW_IPS"] = ",".join(proxies)
    if proxies:
        log.info("X-Forwarded-For is honoured from %s only", ", ".join(proxies))


def signin_kwargs(annotators: str | Path, throttle: SignInThrottle | None = None) -> dict[str, Any]:
    """`demo.launch` keyword arguments: the throttled check and the middleware it needs (the
    first of the app's middleware: `ui.launch_kwargs` adds the HTTP guard after it)."""
    from starlette.middleware import Middleware

    return {"auth": throttled(checker(annotators), throttle or SignInThrottle()),
            "app_kwargs": {"middleware": [Middleware(ClientAddress)]}}
