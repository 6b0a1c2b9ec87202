"""Convert an authors' checkpoint of a textual-inversion method (Pic2Word, SEARLE, LinCIR) into
this project's checkpoint folder (config.json + model.safetensors).

    python -m cir_core.methods.convert searle SEARLE_ViTL14.pt out/searle-xl \\
        --backbone ViT-L-14 --pretrained openai --allow-pickle

The source is what the authors' code writes: a `torch.save` dict holding φ's state dict under
`state_dict_img2text` (Pic2Word, `src/main.py`) or `Phi` (SEARLE and LinCIR, `save_phi`), keys
as in their module definitions (a `module.` prefix from DDP is dropped); or a bare state dict;
or a `.safetensors` file of those keys. A pickle (`.pt`, `.pth`, `.bin`, `.ckpt`) can run code
when it is loaded, so it is refused unless `--allow-pickle` is given, and even then it is read
with `torch.load(weights_only=True)` (tensors and plain containers only). φ's hidden widths are
read from the tensors; its input and output widths must be the backbone's embedding dimension
and token width, or the conversion stops with the file, the key and both shapes.

φ reads what the authors' inference feeds it: the raw image feature f_I(x), each image with its
own norm (`arch.raw_input`; the embeddings record the raw norms). `--input-scale S` instead
makes φ read S · v_r, one scale for every image (the world-trained peers' convention).
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any

from cir_core.checkpoint import Checkpoint, read_state_file, shapes_of, state_dict_in
from cir_core.errors import CheckpointError, CIRError, InputError

from ..encoder import Towers
from ..settings import add_backbone_args, add_device_arg
from .base import get_method_class
from .pseudoword import token_width
from .textinv import TextInversionMethod

PICKLE_HINT = ("pass --allow-pickle to read it with torch.load(weights_only=True), "
               "or convert it to .safetensors first")


def mapper_state(path: Path, cls: type[TextInversionMethod], allow_pickle: bool) -> dict[str, Any]:
    """φ's state dict out of what the authors' code saved at `path` (`cir_core.checkpoint`'s
    reader): `obj[cls.source_key]` when present, else the object itself; `module.` dropped."""
    obj = read_state_file(path, allow_pickle, PICKLE_HINT)
    return state_dict_in(obj, cls.source_key, str(path), f" for {cls.name} (layout: {cls.source_file})")


def convert(method: str, source: str | Path, out: str | Path, backbone: Towers, allow_pickle: bool = False,
            chord_lambda: float | None = None, input_scale: float | None = None,
            base: str | Path | None = None) -> Path:
    """Write `out` (config.json + model.safetensors) from the authors' checkpoint `source`, for
    `backbone`. `input_scale` None: φ reads each reference's raw image feature, as the authors'
    code does; a number: φ reads input_scale · v_r. `chord_lambda` None keeps the default (no val
    search here). A method with its own release format (`convert_release`: RTD's text encoder)
    converts itself; `base` is then the checkpoint it builds on (RTD: the peer's φ)."""
    cls = get_method_class(method)
    release = getattr(cls, "convert_release", None)
    if release is not None:
        return release(Path(source), Path(out), backbone, allow_pickle, chord_lambda, input_scale, base)
    m = base_from_release(method, Path(source), backbone, allow_pickle, input_scale)
    if chord_lambda is not None:
        m.chord_lambda = float(chord_lambda)
    return m.save(out, metrics={})


def base_from_release(method: str, source: Path, backbone: Towers, allow_pickle: bool = False,
                      input_scale: float | None = None) -> TextInversionMethod:
    """The textual-inversion method `method` with φ from `source`: a checkpoint folder of this
    project, or the authors' file (its `checkpoint.extra["converted_from"]` then says which)."""
    cls = get_method_class(method)
    if not (isinstance(cls, type) and issubclass(cls, TextInversionMethod)):
        raise InputError(f"{method!r} is not a textual-inversion method; convert takes "
                         f"{', '.join(convertible())}")
    if source.is_dir():
        return cls.from_checkpoint(backbone, source)
    state = mapper_state(source, cls, allow_pickle)
    shapes = shapes_of(state)
    assert cls.config_cls is not None, "a textual-inversion method declares its architecture"
    arch = cls.arch_from_state(shapes, cls.config_cls())
    width = token_width(backbone.model)
    # build φ for this backbone with the checkpoint's hidden widths: every key and shape must match
    expected = shapes_of(cls.build_mapper(backbone.dim, width, arch).state_dict())
    try:
        cls.check_state(shapes, expected, str(source))
    except CheckpointError as exc:
        raise CheckpointError(f"{exc} (backbone {backbone.id}: embedding dim {backbone.dim}, "
                              f"token width {width})") from None
    arch.raw_input = input_scale is None
    arch.input_scale = 1.0 if input_scale is None else float(input_scale)
    m = cls(backbone, {"arch": arch.to_dict()})
    m.mapper.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    m.checkpoint = Checkpoint(m.name, backbone.id, int(backbone.dim), extra={"converted_from": {
        "file": source.name, "sha256": digest, "layout": cls.source_file,
        "phi_input": "raw image features, each image's own norm (the authors' inference)" if input_scale is None
        else f"input_scale {float(input_scale):g} x the unit reference embedding (given)"}})
    return m


def convertible() -> list[str]:
    """The registered methods the converter takes: the textual-inversion ones (and their RTD)."""
    from .base import list_methods

    return [n for n in list_methods() if issubclass(get_method_class(n), TextInversionMethod)]


def main(argv: list[str] | None = None) -> int:
    from cir_core.paths import DEFAULT_BACKBONE

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("method", choices=convertible())
    ap.add_argument("source", type=Path, help="the authors' checkpoint (.pt / .pth / .safetensors)")
    ap.add_argument("out", type=Path, help="the checkpoint folder to write")
    add_backbone_args(ap, default=DEFAULT_BACKBONE)
    add_device_arg(ap)
    ap.add_argument("--allow-pickle", action="store_true",
                    help="read a torch.save pickle (with torch.load(weights_only=True))")
    ap.add_argument("--chord-lambda", type=float, default=None, help="Chord λ to record (default 0.34)")
    ap.add_argument("--input-scale", type=float, default=None,
                    help="φ's input = this × the unit reference embedding, one scale for every image "
                         "(default: each image's raw feature, as the authors' code feeds φ)")
    ap.add_argument("--base", type=Path, default=None,
                    help="RTD: the peer's φ it was tuned with (a checkpoint folder or the authors' φ file)")
    args = ap.parse_args(argv)
    try:
        from cir_core.backbone import load_backbone

        bb = load_backbone(args.backbone, args.pretrained, device=args.device)
        folder = convert(args.method, args.source, args.out, bb, args.allow_pickle, args.chord_lambda,
                         args.input_scale, args.base)
    except CIRError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {folder} ({args.method} for {bb.id})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
