"""cir_core.chat: the one chat-completions client (CIReVL and the ITT generator ask through it)."""
from __future__ import annotations

import httpx
import pytest

from cir_core.chat import ChatEndpoint, ChatError, ChatMalformed, ChatRefused
from cir_core.errors import InputError


def server(answers, seen):
    def handle(request):
        seen.append(request)
        status, payload, headers = answers.pop(0)
        return httpx.Response(status, json=payload, headers=headers)
    return httpx.MockTransport(handle)


def ok(text):
    return (200, {"choices": [{"message": {"content": text}}]}, {})


def endpoint(answers, seen, slept, **kw):
    return ChatEndpoint("http://llm.local/v1", "m", "key", transport=server(answers, seen), sleep=slept.append, **kw)


def test_retries_with_backoff_and_honours_retry_after():
    seen, slept = [], []
    chat = endpoint([(503, {}, {}), (429, {}, {"retry-after": "7"}), ok("hi")], seen, slept, backoff=0.5)
    assert chat.complete([{"role": "user", "content": "x"}], temperature=0) == "hi"
    assert slept == [0.5, 7.0] and len(seen) == 3
    assert seen[0].url == "http://llm.local/v1/chat/completions" and seen[0].headers["authorization"] == "Bearer key"


def test_what_no_retry_can_help_stops_at_once():
    seen, slept = [], []
    with pytest.raises(ChatRefused, match="HTTP 401"):
        endpoint([(401, {}, {})], seen, slept).complete([])
    with pytest.raises(ChatError, match="HTTP 400") as bad:
        endpoint([(400, {}, {})], seen, slept).complete([])
    assert bad.value.status == 400 and not isinstance(bad.value, ChatRefused)
    with pytest.raises(ChatMalformed):
        endpoint([(200, {"nothing": 1}, {})], seen, slept).complete([])
    with pytest.raises(ChatMalformed, match="content is 3"):
        endpoint([(200, {"choices": [{"message": {"content": 3}}]}, {})], seen, slept).complete([])
    assert len(seen) == 4 and slept == []


def test_gives_up_after_the_retries():
    seen, slept = [], []
    with pytest.raises(ChatError, match="failed after 3 tries: HTTP 502"):
        endpoint([(502, {}, {})] * 3, seen, slept, retries=2).complete([])
    assert slept == [1.0, 2.0]


def test_bad_settings_are_refused():
    with pytest.raises(InputError, match="http"):
        ChatEndpoint("llm.local", "m")
    with pytest.raises(InputError, match="model"):
        ChatEndpoint("http://llm.local", "")
