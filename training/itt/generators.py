"""The three ways to write a triplet: rules (`TemplateGenerator`), an OpenAI-compatible
chat-completions endpoint (`EndpointGenerator`), a local transformers model (`HFGenerator`).

Each has `info` (the record's `generator` field) and `generate(caption, edit_type, job_id)` →
{edit, target_caption, negatives[, ops]}. A job that cannot be done raises `GenerationError`
(counted, retried on the next run); a setting that can never work raises `FatalError`.
"""
from __future__ import annotations

import random
import time
from typing import Callable

from cir_core.chat import ChatEndpoint, ChatError, ChatMalformed, ChatRefused
from cir_core.errors import CIRError, InputError

from . import rules
from .prompts import AnswerError, messages, parse_answer


class GenerationError(RuntimeError):
    """This one job failed (after retries); the run goes on."""


class FatalError(CIRError):
    """No job can succeed (bad URL, rejected key): the run stops."""


class TemplateGenerator:
    """Rule-based edits; the draw for a job depends on (seed, job id) alone, so output is
    identical whatever the order, the workers or the interruptions."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.info = {"mode": "template", "model": rules.RULESET, "seed": seed}

    def generate(self, caption: str, edit_type: str, job_id: str) -> dict:
        out = rules.generate(caption, edit_type, random.Random(f"{self.seed}:{job_id}"))
        if out is None:
            raise GenerationError(f"no {edit_type} rule applies to this caption")
        return out


class ModelGenerator:
    """Shared by the model modes: ask, parse strictly, re-ask on a malformed answer."""

    def __init__(self, prompts: dict, n_negatives: int = 2, retries: int = 3):
        self.prompts, self.n_negatives, self.retries = prompts, n_negatives, retries

    def ask(self, msgs: list[dict]) -> str:
        raise NotImplementedError

    def generate(self, caption: str, edit_type: str, job_id: str) -> dict:
        msgs = messages(self.prompts, caption, edit_type, self.n_negatives)
        last = "no attempt"
        for _ in range(self.retries + 1):
            try:
                return parse_answer(self.ask(msgs), caption)
            except AnswerError as exc:
                last = str(exc)
        raise GenerationError(f"malformed answer after {self.retries + 1} tries: {last}")


class EndpointGenerator(ModelGenerator):
    """Any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama, TGI) through the project's one
    chat client (`cir_core.chat`): timeouts, 429 and 5xx retried with exponential backoff
    (Retry-After honoured); 401/403/404 stop the run."""

    def __init__(self, url: str, model: str, prompts: dict, api_key: str | None = None,
                 timeout: float = 60.0, retries: int = 3, backoff: float = 1.0, json_mode: bool = True,
                 temperature: float = 0.7, max_tokens: int = 512, n_negatives: int = 2,
                 sleep: Callable[[float], None] = time.sleep):
        super().__init__(prompts, n_negatives, retries)
        self.endpoint = ChatEndpoint(url, model, api_key, timeout, retries, backoff, sleep, what="--endpoint")
        self.url, self.model = self.endpoint.url, model
        self.params: dict = {"temperature": temperature, "max_tokens": max_tokens}
        if json_mode:
            self.params["response_format"] = {"type": "json_object"}
        self.info = {"mode": "endpoint", "model": model, "endpoint": self.url,
                     "prompts": prompts["version"], "temperature": temperature, "json_mode": json_mode}

    def ask(self, msgs: list[dict]) -> str:
        try:
            return self.endpoint.complete(msgs, **self.params)
        except ChatRefused as exc:
            raise FatalError(f"endpoint {exc} (check --endpoint, --model and the API key variable)") from None
        except ChatMalformed as exc:
            raise AnswerError(str(exc)) from None
        except ChatError as exc:
            hint = " (if the server lacks JSON mode, try --no-json-mode)" if exc.status == 400 else ""
            raise GenerationError(f"endpoint {exc}{hint}") from None


class HFGenerator(ModelGenerator):
    """A local transformers causal LM (folder or cached Hub name, loaded offline). Runs jobs one
    at a time; `transformers` is imported only here."""

    def __init__(self, path: str, prompts: dict, device: str = "cpu", temperature: float = 0.7,
                 max_new_tokens: int = 512, n_negatives: int = 2, retries: int = 3):
        super().__init__(prompts, n_negatives, retries)
        try:
            import transformers
        except ImportError:
            raise InputError("--hf-model needs the 'transformers' package, which is not installed: "
                             "pip install transformers (and accelerate for large models)") from None
        try:
            self.tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
            self.model = transformers.AutoModelForCausalLM.from_pretrained(path, local_files_only=True).to(device)
        except (OSError, ValueError) as exc:
            raise InputError(f"--hf-model {path!r} could not be loaded: {exc}") from None
        self.device, self.temperature, self.max_new_tokens = device, temperature, max_new_tokens
        self.info = {"mode": "hf", "model": str(path), "prompts": prompts["version"],
                     "temperature": temperature}

    def ask(self, msgs: list[dict]) -> str:
        if getattr(self.tok, "chat_template", None):
            ids = self.tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt")
        else:  # a base model: plain text, the answer is expected to follow
            text = "\n\n".join(m["content"] for m in msgs) + "\n\nJSON answer:\n"
            ids = self.tok(text, return_tensors="pt")["input_ids"]
        ids = ids.to(self.device)
        sample = self.temperature > 0
        out = self.model.generate(ids, max_new_tokens=self.max_new_tokens, do_sample=sample,
                                  **({"temperature": self.temperature} if sample else {}),
                                  pad_token_id=getattr(self.tok, "eos_token_id", None))
        return self.tok.decode(out[0][ids.shape[-1]:], skip_special_tokens=True)
