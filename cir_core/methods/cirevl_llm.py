"""CIReVL's captioner and rewriter as any OpenAI-compatible chat-completions server (OpenAI, vLLM,
llama.cpp, Ollama, TGI): the user's VLM captions the reference, the user's LLM rewrites the caption.

The requests are the official code's (ExplainableML/Vision_by_Language `src/openai_api.py`:
one user message, temperature 0, max_tokens 700, stop at a blank line; `src/utils.py`): the
rewriter's prompt is the base prompt + "Image Content: {caption}" + "Instruction: {instruction}"
and the description is the text after the first "Edited Description:" line's colon (the
instruction when there is none); the captioner's prompt is their BLIP prompt, sent with the image.
Timeouts, 429 and 5xx are retried with exponential backoff; 401/403/404 stop with a clear error
(`cir_core.chat`, the client the ITT generator uses too).
"""
from __future__ import annotations

import base64
import io
import time
from typing import Any, Callable

from cir_core.chat import ChatEndpoint, ChatError, ChatRefused
from cir_core.errors import InputError
from cir_core.memo import LRU

# src/prompts.py: simple_modifier_prompt (main.py's default --llm_prompt) and blip_prompt
REWRITE_PROMPT = """
I have an image. Given an instruction to edit the image, carefully generate a description of the 
edited image. I will put my image content beginning with “Image Content:”. The instruction I provide will begin with “Instruction:". 
The edited description you generate should begin with “Edited Description:". The edited description you generate  should be complete and can cover various semantic aspects, 
including cardinality, addition, negation, direct addressing, compare & change, comparative, conjunction, spatial relations & background, viewpoint. 
The edited description needs to be as simple as possible. The instruction does not need to explicitly indicate which
type it is. Avoid adding imaginary things. Each time generate one instruction and one edited description only. Keep the edited description as short as possible"""
CAPTION_PROMPT = "Describe the image in complete detail. You must especially focus on all the objects in the image"


class ChatClient:
    """CIReVL's requests (the official code's settings) through the project's one chat client
    (`cir_core.chat`), its failures worded for the CIR_CIREVL_* settings."""

    def __init__(self, url: str, model: str, api_key: str | None = None, timeout: float = 60.0,
                 retries: int = 3, backoff: float = 1.0, sleep: Callable[[float], None] = time.sleep,
                 transport: Any = None):
        if not model:
            raise InputError(f"CIReVL endpoint {url} needs a model name (CIR_CIREVL_MODEL)")
        self.endpoint = ChatEndpoint(url, model, api_key, timeout, retries, backoff, sleep, transport,
                                     what="CIReVL endpoint")
        self.url, self.model = self.endpoint.url, model

    def ask(self, content: Any) -> str:
        try:
            return self.endpoint.complete([{"role": "user", "content": content}], temperature=0,
                                          max_tokens=700, stop=["\n\n", "<|endoftext|>"])
        except ChatRefused as exc:
            raise InputError(f"CIReVL endpoint {exc} (check CIR_CIREVL_ENDPOINT, CIR_CIREVL_MODEL "
                             "and the API key variable)") from None
        except ChatError as exc:
            raise InputError(f"CIReVL endpoint {exc}") from None


def edited_description(answer: str, instruction: str) -> str:
    """src/utils.py: the first line starting "Edited Description:", after its colon; the
    instruction when there is none or it is empty."""
    for line in answer.split("\n"):
        if line.strip().startswith("Edited Description:"):
            return line.split(":")[1].strip() or instruction
    return instruction


class EndpointRewriter:
    """The LLM rewrite, answers remembered (the same caption and instruction are asked once)."""

    def __init__(self, client: ChatClient, prompt: str = REWRITE_PROMPT):
        self.client, self.prompt = client, prompt
        self.memo: LRU[tuple[str, str], str] = LRU(4096)
        self.info = {"mode": "endpoint", "endpoint": client.url, "model": client.model}

    def rewrite(self, caption: str, instruction: str) -> str:
        if not instruction.strip():
            return caption  # nothing to edit: the caption is the description (q_∅)
        key = (caption, instruction)
        out = self.memo.get(key)
        if out is None:
            prompt = self.prompt + "\n" + "Image Content: " + caption + "\n" + "Instruction: " + instruction
            out = edited_description(self.client.ask(prompt), instruction)
            self.memo.put(key, out)
        return out


class EndpointCaptioner:
    """The VLM caption of each reference image (CIReVL's BLIP-2 step), remembered per image."""

    def __init__(self, client: ChatClient, prompt: str = CAPTION_PROMPT):
        self.client, self.prompt = client, prompt
        self.memo: LRU[bytes, str] = LRU(4096)  # PNG bytes of the image -> its caption
        self.info = {"mode": "endpoint", "endpoint": client.url, "model": client.model}

    def caption(self, refs: Any) -> list[str]:
        if refs.images is None or any(im is None for im in refs.images):
            raise InputError("CIReVL's endpoint captioner needs the reference image, which this caller "
                             "did not pass (a benchmark gives embeddings only): use CIR_CIREVL_CAPTIONER=bank "
                             "with a caption bank, or =given with captions")
        return [self._one(im) for im in refs.images]

    def _one(self, image: Any) -> str:
        buf = io.BytesIO()
        image.convert("RGB").save(buf, format="PNG")
        data = buf.getvalue()
        out = self.memo.get(data)
        if out is None:
            url = "data:image/png;base64," + base64.b64encode(data).decode()
            out = self.client.ask([{"type": "text", "text": self.prompt},
                                   {"type": "image_url", "image_url": {"url": url}}]).strip()
            self.memo.put(data, out)
        return out
