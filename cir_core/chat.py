"""The project's one client for an OpenAI-compatible chat-completions server (OpenAI, vLLM,
llama.cpp, Ollama, TGI): CIReVL's captioner and rewriter and the ITT triplet generator both ask
through it. Timeouts, refused connections, 429 and 5xx are retried with exponential backoff
(Retry-After honoured, at most 60 s a wait); 401/403/404 stop at once (`ChatRefused`: the URL,
model or key is wrong, no retry can help); any other status, or an answer that is not a
chat-completions one, is a `ChatError` for the caller to word."""
from __future__ import annotations

import time
from typing import Any, Callable

from .errors import CIRError, InputError

RETRY_STATUS = (429,)  # and every 5xx


class ChatError(CIRError):
    """The server did not answer with a message; `status` is its HTTP status (None: no answer)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class ChatRefused(ChatError):
    """401, 403 or 404: the endpoint, the model or the key is wrong."""


class ChatMalformed(ChatError):
    """HTTP 200, but not a chat-completions answer (no choices[0].message.content string)."""


class ChatEndpoint:
    """POST `{url}/chat/completions`; `complete(messages, **params)` is the first choice's text.
    The httpx client is pooled and thread-safe (the ITT builder asks from several workers)."""

    def __init__(self, url: str, model: str, api_key: str | None = None, timeout: float = 60.0,
                 retries: int = 3, backoff: float = 1.0, sleep: Callable[[float], None] = time.sleep,
                 transport: Any = None, what: str = "chat endpoint"):
        import httpx

        url = url.rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise InputError(f"{what} must be an http(s) URL, got {url!r}")
        if not model:
            raise InputError(f"{what} {url} needs a model name")
        self.url = url if url.endswith("/chat/completions") else url + "/chat/completions"
        self.model, self.retries, self.backoff, self.sleep, self.httpx = model, retries, backoff, sleep, httpx
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(timeout=timeout, headers=headers, transport=transport)

    def wait(self, attempt: int, retry_after: str | None) -> None:
        """Before try `attempt` + 1: backoff * 2**attempt, or the server's Retry-After if longer."""
        delay = self.backoff * 2 ** attempt
        if retry_after and retry_after.strip().isdigit():
            delay = max(delay, float(retry_after))
        self.sleep(min(delay, 60.0))

    def complete(self, messages: list[dict], **params: Any) -> str:
        body = {"model": self.model, **params, "messages": messages}
        last, retry_after = "", None
        for attempt in range(self.retries + 1):
            if attempt:
                self.wait(attempt - 1, retry_after)
            retry_after = None
            try:
                r = self.client.post(self.url, json=body)
            except self.httpx.HTTPError as exc:  # timeouts, refused connections
                last = f"{type(exc).__name__}: {exc}"
                continue
            if r.status_code in (401, 403, 404):
                raise ChatRefused(f"{self.url} answered HTTP {r.status_code}: {r.text[:200]}", r.status_code)
            if r.status_code in RETRY_STATUS or r.status_code >= 500:
                last, retry_after = f"HTTP {r.status_code}: {r.text[:200]}", r.headers.get("retry-after")
                continue
            if r.status_code != 200:
                raise ChatError(f"{self.url} answered HTTP {r.status_code}: {r.text[:200]}", r.status_code)
            return _content(r, self.url)
        raise ChatError(f"{self.url} failed after {self.retries + 1} tries: {last}")


def _content(r: Any, url: str) -> str:
    try:
        content = r.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise ChatMalformed(f"{url}: not a chat-completions answer: {r.text[:160]!r}", 200) from None
    if content is None:
        return ""
    if not isinstance(content, str):
        raise ChatMalformed(f"{url}: the answer's message content is {content!r}", 200)
    return content
