"""open_clip backbones: build or load one, encode images and texts, save a ``local-dir:`` folder."""
from __future__ import annotations

import contextlib
import difflib
import functools
import hashlib
import json
import logging
import os
from functools import partial
from pathlib import Path
from typing import Any, Iterator, Sequence, Union

import numpy as np
import open_clip
import torch
from PIL import Image

from cir_core import env
from cir_core.backbone_id import QUICKGELU, activation
from cir_core.checkpoint import check_fit, read_state_file, shapes_of, state_dict_in, write_weights
from cir_core.errors import BackboneError, CheckpointError
from cir_core.fileio import atomic_write, loads_json
from cir_core.imageio import load_image
from cir_core.paths import DEFAULT_BACKBONE as DEFAULT_MODEL
from cir_core.paths import DEFAULT_BACKBONE_DIR
from cir_core.progress import bar as progress_bar
from cir_core.spaces_compat import gpu
from cir_core.text_tower import encode_tokens

TINY_MODEL = "cir-tiny-vit"
CONFIG_DIR = Path(__file__).resolve().parent / "model_configs"
CONFIG_FILE, WEIGHTS_FILE = "open_clip_config.json", "open_clip_model.safetensors"
ImageInput = Union[Image.Image, str, os.PathLike]


def tag_wants_quick_gelu(model: str, pretrained: str | None) -> bool:
    """Whether open_clip's pretrained table says `model`'s weights under tag `pretrained` were
    trained with QuickGELU (every `openai` tag, and others): open_clip 3.3 builds such a model
    with nn.GELU unless told, and only warns."""
    if not pretrained:
        return False
    return bool(open_clip.pretrained.get_pretrained_cfg(model, pretrained).get("quick_gelu", False))


def uses_quick_gelu(model: torch.nn.Module) -> bool:
    """Whether a built open_clip model runs QuickGELU anywhere (its own transformer blocks)."""
    from open_clip.transformer import QuickGELU

    return any(isinstance(m, QuickGELU) for m in model.modules())


def cached_weights(model: str, pretrained: str) -> str | None:
    """Where open_clip's weights for `model` under tag `pretrained` sit in the local cache (the
    Hugging Face cache, or open_clip's own for a URL-only tag), without touching the network;
    None when they are not there, or when the tag is not an open_clip tag of `model`."""
    cfg = open_clip.pretrained.get_pretrained_cfg(model.replace("/", "-"), pretrained)
    if not cfg:
        return None
    hub = cfg.get("hf_hub", "")
    if hub:
        from huggingface_hub import try_to_load_from_cache

        repo, name = os.path.split(hub.rstrip("/")) if not hub.endswith("/") else (hub.rstrip("/"), "")
        names = ([Path(name).with_suffix(".safetensors").name, name] if name.endswith(".bin") else [name]) if name \
            else ["open_clip_model.safetensors", "open_clip_pytorch_model.bin"]
        for n in names:
            found = try_to_load_from_cache(repo, n)
            if isinstance(found, str):
                return found
        return None
    url = cfg.get("url", "")
    path = Path("~/.cache/clip").expanduser() / os.path.basename(url) if url else None
    return str(path) if path is not None and path.is_file() else None


def register_project_configs() -> None:
    """Make ``model_configs/*.json`` (e.g. ``cir-tiny-vit``) known to open_clip; idempotent."""
    known = set(open_clip.list_models())
    if any(p.stem not in known for p in CONFIG_DIR.glob("*.json")):
        open_clip.add_model_config(CONFIG_DIR)


@functools.lru_cache(maxsize=64)
def _sha256_prefix(path: str, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def weights_hash(path: str | os.PathLike) -> str:
    """First 16 hex digits of the file's sha256, memoised per (path, mtime, size)."""
    st = os.stat(path)
    return _sha256_prefix(os.path.abspath(path), st.st_mtime_ns, st.st_size)


def load_weights_into(model: torch.nn.Module, path: Path, name: str) -> None:
    """Load a weights file (safetensors, or a pickle read with weights_only=True; a `state_dict`
    inside and DDP's `module.` prefix allowed) into ``model``, or raise a one-line
    ``CheckpointError`` naming the file and the mismatched keys (`checkpoint.check_fit`)."""
    if not path.is_file():
        raise CheckpointError(f"checkpoint file {path} not found (model '{name}')")
    state = state_dict_in(read_state_file(path, allow_pickle=True), "state_dict", f"checkpoint {path}")
    expected = model.state_dict()
    for key in ("logit_scale", "logit_bias"):  # scalar vs 1-element, both occur in the wild
        if key in state and key in expected and state[key].numel() == expected[key].numel():
            state[key] = state[key].reshape(expected[key].shape)
    check_fit(shapes_of(state), shapes_of(expected), f"checkpoint {path}", f"model '{name}'")
    model.load_state_dict(state, strict=True)


def _offline_hint(what: str, exc: Exception) -> BackboneError:
    from huggingface_hub import constants
    if constants.HF_HUB_OFFLINE or (env.read("HF_HUB_OFFLINE") or "").lower() in ("1", "true", "yes"):
        why = "they are not in the local cache and HF_HUB_OFFLINE is set"
    else:
        why = f"they are not in the local cache and could not be downloaded (network unavailable?): {exc}"
    return BackboneError(f"cannot load weights for {what}: {why}".splitlines()[0])


def _find_local_weights(folder: Path) -> Path:
    preferred = folder / WEIGHTS_FILE
    if preferred.is_file():
        return preferred
    found = sorted(p for ext in ("safetensors", "bin", "pth", "pt") for p in folder.glob(f"*.{ext}"))
    if not found:
        raise CheckpointError(f"backbone folder {folder} has no weights file (expected {WEIGHTS_FILE})")
    return found[0]


class Backbone:
    """An open_clip model in eval mode plus its tokenizer and eval transform."""

    def __init__(self, model: Any, tokenizer: Any, preprocess: Any, device: str,
                 name: str, id: str, dim: int | None = None) -> None:
        # `model`: open_clip's CLIP (an nn.Module), which ships no types: its towers are read by name
        self.model, self.tokenizer, self.preprocess = model, tokenizer, preprocess
        self.device, self.name, self.id = device, name, id
        if dim is None:  # towers differ in where they keep it (CLIP, timm, HF): ask the model itself
            with torch.inference_mode():
                dim = model.encode_text(tokenizer([""]).to(device)).shape[-1]
        self.dim = int(dim)
        size = open_clip.get_model_preprocess_cfg(model)["size"]
        self.image_size = int(size) if isinstance(size, int) else int(max(size))  # side; max if not square
        self.context_length = int(getattr(tokenizer, "context_length", model.context_length))

    def __repr__(self) -> str:
        return f"Backbone(id={self.id!r}, dim={self.dim}, device={self.device!r})"

    def image_tensor(self, images: Sequence[ImageInput]) -> torch.Tensor:
        """Preprocessed batch ``(N, 3, H, W)`` on the backbone's device; paths go through ``load_image``."""
        return torch.stack([self.preprocess(load_image(im)) for im in images]).to(self.device)

    def tokenize(self, texts: Sequence[str]) -> torch.Tensor:
        """Token ids ``(N, context_length)`` on the backbone's device (long texts are truncated)."""
        return self.tokenizer(list(texts)).to(self.device)

    def token_count(self, text: str) -> int | None:
        """Tokens `text` takes in the text tower, start and end tokens included (None when the
        tokenizer cannot count; compare with `context_length`: beyond it the tower cuts the text)."""
        enc = getattr(self.tokenizer, "encode", None)  # open_clip's SimpleTokenizer
        if enc is None:
            enc = getattr(getattr(self.tokenizer, "tokenizer", None), "encode", None)  # HF tokenizers
            return None if enc is None else len(enc(text))  # HF's encode adds its own specials
        return len(enc(text)) + 2

    def _encode(self, items: Sequence[Any], batch_size: int, progress: bool,
                kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(unit embeddings (N, dim), raw feature norms (N,)), float32."""
        out, norms = [np.zeros((0, self.dim), np.float32)], [np.zeros(0, np.float32)]
        # The text path trims trailing padding (exact for causal towers, and cheaper).
        encode = self.model.encode_image if kind == "images" else partial(encode_tokens, self.model)
        prepare = self.image_tensor if kind == "images" else self.tokenize
        with torch.inference_mode(), progress_bar(total=len(items), disable=not progress, unit=kind[:-1],
                                                  desc=f"encoding {kind}") as bar:
            for start in range(0, len(items), max(1, batch_size)):
                chunk = items[start:start + max(1, batch_size)]
                feats = encode(prepare(chunk)).float()
                out.append(torch.nn.functional.normalize(feats, dim=-1).cpu().numpy())
                norms.append(feats.norm(dim=-1).cpu().numpy())
                bar.update(len(chunk))
        return (np.ascontiguousarray(np.concatenate(out), dtype=np.float32),
                np.concatenate(norms).astype(np.float32))

    @gpu
    def encode_image_batch(self, x: torch.Tensor, with_norms: bool = False) -> Any:
        """L2-normalised embeddings (N, dim) float32 of an already preprocessed batch; with
        `with_norms`, also the raw (pre-normalisation) feature norms (N,)."""
        with torch.inference_mode():
            feats = self.model.encode_image(x.to(self.device, non_blocking=True)).float()
            emb = np.ascontiguousarray(torch.nn.functional.normalize(feats, dim=-1).cpu().numpy(), np.float32)
            return (emb, feats.norm(dim=-1).cpu().numpy().astype(np.float32)) if with_norms else emb

    @gpu  # ZeroGPU's @spaces.GPU on a Space (cir_core.spaces_compat); the identity elsewhere
    def encode_images(self, images: Sequence[ImageInput], batch_size: int = 64,
                      progress: bool = False, with_norms: bool = False) -> Any:
        """L2-normalised image embeddings, float32 ``(N, dim)``; with `with_norms`, also the raw
        feature norms ``(N,)`` (what the zero-shot peers' released φ reads, see methods/refs)."""
        emb, norms = self._encode(list(images), batch_size, progress, "images")
        return (emb, norms) if with_norms else emb

    @gpu
    def encode_texts(self, texts: Sequence[str], batch_size: int = 256, progress: bool = False) -> np.ndarray:
        """L2-normalised text embeddings, float32 ``(N, dim)``; empty strings are valid inputs."""
        return self._encode([str(t) for t in texts], batch_size, progress, "texts")[0]


def _create(spec: str, pretrained: str | None, device: str, seed: int,
            weights_follow: bool, quick_gelu: bool = False) -> tuple[Any, Any]:
    # Seed inside a forked RNG: same call -> same random weights, caller's RNG untouched.
    # local-dir weights are loaded by load_weights_into instead, for its one-line mismatch errors.
    with torch.random.fork_rng(devices=[]), random_init_on_purpose(weights_follow):
        torch.manual_seed(seed)
        model, _, preprocess = open_clip.create_model_and_transforms(
            spec, pretrained=pretrained, device=device, load_weights=not spec.startswith("local-dir:"),
            force_quick_gelu=quick_gelu)
    return model, preprocess


@contextlib.contextmanager
def random_init_on_purpose(on: bool = True) -> Iterator[None]:
    """Around an open_clip build whose random weights are meant (weights loaded right after, or a
    model trained from scratch): open_clip logs "No pretrained weights loaded ... initialized
    randomly" on the root logger for every such build, which would read as a failed load."""
    quiet = (lambda r: not str(r.msg).startswith("No pretrained weights loaded")) if on else None
    if quiet:
        logging.getLogger().addFilter(quiet)
    try:
        yield
    finally:
        if quiet:
            logging.getLogger().removeFilter(quiet)


def _pinned_hub_folder(spec: str) -> Path:
    """`hf-hub:org/name@rev` fetched at that revision (manifest-verified when it has one,
    safetensors only) by cir_core.storage.repo; open_clip's own hf-hub loader cannot pin a revision."""
    from cir_core.storage import StorageError
    from cir_core.storage.repo import pull

    try:
        return pull("backbone", spec, require_manifest=False).folder
    except StorageError as exc:
        raise BackboneError(f"cannot load backbone {spec}: {exc}".splitlines()[0]) from None


def load_backbone(model: str = DEFAULT_MODEL, pretrained: str | None = None, device: str = "cpu",
                  seed: int = 0) -> Backbone:
    """Build an open_clip backbone.

    ``model``: an open_clip name (``"ViT-B-32"``, ``"cir-tiny-vit"``), ``"local-dir:/path"`` or
    ``"hf-hub:org/repo"`` (``"hf-hub:org/repo@rev"`` pins a branch, tag or sha). ``pretrained``:
    None (random init from ``seed``), an open_clip tag, or a
    checkpoint file (``.safetensors``, ``.pt``, ``.pth``, ``.bin``). A tag whose open_clip entry
    says ``quick_gelu`` (``openai``, ...) builds the model with QuickGELU, and the id then ends in
    ``+quickgelu`` (a ``*-quickgelu`` name says it already); a checkpoint *file* runs the name's
    own activation (use the ``-quickgelu`` name for OpenAI weights). Raises ``BackboneError`` /
    ``CheckpointError`` with a one-line message.
    """
    register_project_configs()
    weights: Path | None = None
    if pretrained is not None and model.startswith(("local-dir:", "hf-hub:")):
        raise BackboneError(f"pretrained='{pretrained}' cannot be combined with '{model}', "
                            "which names its own weights")
    if model.startswith("hf-hub:") and "@" in model:
        model = f"local-dir:{_pinned_hub_folder(model)}"
    if model.startswith("local-dir:"):
        folder = Path(model[len("local-dir:"):]).expanduser()
        if not (folder / CONFIG_FILE).is_file():
            raise BackboneError(f"backbone folder {folder} not found or has no {CONFIG_FILE}"
                                + (f" (train one, or use model='{TINY_MODEL}' for random weights)"
                                   if folder == DEFAULT_BACKBONE_DIR else ""))
        weights = _find_local_weights(folder)
        try:
            cfg = loads_json((folder / CONFIG_FILE).read_text())
        except (OSError, ValueError) as exc:
            raise BackboneError(f"cannot read {folder / CONFIG_FILE}: {exc}") from None
        name, spec = str(cfg.get("model_name", folder.name)), f"local-dir:{folder}"
        ident, open_clip_pretrained = f"{name}@local:{weights_hash(weights)}", None
    elif model.startswith("hf-hub:"):
        name = spec = model
        ident, open_clip_pretrained = model, None
        try:  # open_clip only warns and keeps random weights when these are missing: resolve first
            open_clip.pretrained.download_pretrained_from_hf(model[len("hf-hub:"):])
        except Exception as exc:
            raise _offline_hint(model, exc) from None
    else:
        model = model.replace("/", "-")  # open_clip's own spelling rule: "ViT-B/32" is "ViT-B-32"
        known = open_clip.list_models()
        if model not in known:
            by_lower = {k.lower(): k for k in known}  # so "vit-b-32" suggests "ViT-B-32" first
            close = [by_lower[k] for k in difflib.get_close_matches(model.lower(), by_lower, n=5, cutoff=0.5)]
            raise BackboneError(f"unknown model '{model}'"
                                + (f"; did you mean {', '.join(close)}?" if close else
                                   f"; see open_clip.list_models() ({len(known)} names)"))
        name = spec = model
        if pretrained is None:
            ident, open_clip_pretrained = f"{model}@random-seed{seed}", None
        elif pretrained in open_clip.list_pretrained_tags_by_model(model):
            ident, open_clip_pretrained = f"{model}@{pretrained}", pretrained
        else:
            weights = Path(pretrained).expanduser()
            if not weights.is_file():
                if weights.suffix in (".safetensors", ".pt", ".pth", ".bin") or os.sep in pretrained:
                    raise CheckpointError(f"checkpoint file {weights} not found (model '{model}')")
                tags = open_clip.list_pretrained_tags_by_model(model)
                shown = ", ".join(tags[:6]) + (", ..." if len(tags) > 6 else "") if tags else "none"
                raise CheckpointError(f"pretrained '{pretrained}' is neither a checkpoint file nor a "
                                      f"known tag for '{model}' (tags: {shown})")
            ident, open_clip_pretrained = f"{model}@local:{weights_hash(weights)}", None
    # The activation the weights were trained with: open_clip only warns when a tag's entry says
    # quick_gelu and the model is built without it, so it is forced here (a `*-quickgelu` name
    # already has it; local-dir / hf-hub folders keep what their own config says).
    quick = tag_wants_quick_gelu(name, open_clip_pretrained) and not name.endswith("-quickgelu")
    try:
        net, preprocess = _create(spec, open_clip_pretrained, device, seed, weights is not None, quick)
    except (RuntimeError, OSError, ValueError, KeyError, TypeError) as exc:
        if open_clip_pretrained is not None or spec.startswith("hf-hub:"):
            raise _offline_hint(f"{name} pretrained='{open_clip_pretrained}'", exc) from None
        raise BackboneError(f"cannot build model '{name}': {exc}".splitlines()[0]) from None
    if weights is not None:
        load_weights_into(net, weights, name)
    net.eval().requires_grad_(False)
    if uses_quick_gelu(net) and activation(ident) != "quickgelu":
        ident += QUICKGELU  # part of the identity: caches and checkpoints of the other one are refused
    dim = (open_clip.get_model_config(spec) or {}).get("embed_dim")
    return Backbone(net, open_clip.get_tokenizer(spec), preprocess, device, name, ident, dim)


def save_backbone_dir(model: torch.nn.Module, model_name: str, out_dir: Path,
                      extra: dict | None = None) -> Path:
    """Write ``model`` as an open_clip ``local-dir:`` folder (config + safetensors, each written
    atomically: a reader never sees half a file); returns ``out_dir``."""
    register_project_configs()
    model_cfg = open_clip.get_model_config(model_name)
    if model_cfg is None:
        raise BackboneError(f"unknown model '{model_name}': cannot write its config")
    if uses_quick_gelu(model):  # built with force_quick_gelu: the folder must say so to reload alike
        model_cfg = {**model_cfg, "quick_gelu": True}
    pp = {k: list(v) if isinstance(v, tuple) else v
          for k, v in open_clip.get_model_preprocess_cfg(model).items()}
    # open_clip's local-dir loader insists on the nested {"model_cfg", "preprocess_cfg"} layout.
    config = {"model_cfg": model_cfg, "preprocess_cfg": pp, "model_name": model_name, "extra": extra or {}}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_weights(out_dir / WEIGHTS_FILE, model.state_dict(), {"model_name": model_name})
    atomic_write(out_dir / CONFIG_FILE, lambda f: f.write(json.dumps(config, indent=2)), False)
    return out_dir
