"""Checkpoints: the one description of a trained method (`Checkpoint`, its folder's config.json)
and the one way to write and read weights (safetensors, atomically) and to check they fit.

A method checkpoint is a folder holding `model.safetensors` (the method's trained tensors only)
and `config.json`, format 2:

    method, format_version, backbone (id), embed_dim, token_width (pseudo-word methods),
    arch (the method's `config_cls`), chord_lambda, lambda_search (how λ was chosen on val),
    lambda_repicked (when `training.pick_lambda` chose it again), metrics, training (the
    trainer's recipe), git_commit, extra (the method's own: prompt, placeholder, objective,
    converted_from, ...)

Format 1 (three schemas: DiCE/PACE `hparams`, PACT `training`/`objective`/`lambda_search`, the
peers `hparams`/`placeholder`/...) is read through `migrate_v1`; `python -m cir_core.checkpoint
upgrade FOLDER...` rewrites such a config.json in format 2 (the weights are not touched).
The backbone's local-dir folder and the training loop's resumable state write and check their
tensors through the same `write_weights` / `read_weights` / `check_fit`.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from cir_core.backbone_id import activation
from cir_core.encoder import Encoder
from cir_core.errors import CheckpointError
from cir_core.fileio import atomic_write, atomic_write_path, loads_json

WEIGHTS = "model.safetensors"
CONFIG = "config.json"
FORMAT_VERSION = 2
log = logging.getLogger(__name__)


# -- tensors ----------------------------------------------------------------------------------------
def check_fit(shapes: Mapping[str, tuple], expected: Mapping[str, tuple], where: str, what: str) -> None:
    """CheckpointError naming the file (`where`), what it should fit, and the key and both shapes
    of every missing, unexpected or differently shaped tensor (the first three)."""
    problems = [f"key {k} is missing" for k in expected if k not in shapes]
    problems += [f"unexpected key {k}" for k in shapes if k not in expected]
    problems += [f"key {k} has shape {tuple(shapes[k])} but the model needs {tuple(v)}"
                 for k, v in expected.items() if k in shapes and tuple(shapes[k]) != tuple(v)]
    if problems:
        raise CheckpointError(f"{where} does not fit {what} ({len(problems)} mismatches): "
                              + "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else ""))


def shapes_of(state: Mapping[str, Any]) -> dict[str, tuple]:
    """{key: shape} of a state dict."""
    return {k: tuple(v.shape) for k, v in state.items()}


def write_weights(path: Path, state: Mapping[str, Any], metadata: dict[str, str] | None = None) -> None:
    """`state` as a safetensors file at `path`, atomically (`fileio.atomic_write_path`). Tensors
    are detached and moved to the CPU; one that shares storage with another (tied weights) or is
    not contiguous is copied, as safetensors requires."""
    import torch
    from safetensors.torch import save_file

    tensors, seen = {}, set()
    for key, value in state.items():
        value = value.detach().cpu()
        ptr = value.untyped_storage().data_ptr()
        if ptr in seen or not value.is_contiguous():  # (clone alone keeps a transpose's strides)
            value = value.clone(memory_format=torch.contiguous_format)
        tensors[key] = value
        seen.add(ptr)
    atomic_write_path(Path(path), lambda tmp: save_file(tensors, str(tmp), metadata=metadata))


def read_weights(path: Path, check: Callable[[dict[str, tuple]], None] | None = None) -> dict:
    """The tensors of a safetensors file. `check(shapes)` sees every key's shape before any tensor
    is read and raises a CheckpointError for a file that does not fit; any other failure (missing,
    corrupt, truncated) becomes a one-line CheckpointError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path.parent} has no {path.name}")
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
            if check is not None:
                check(shapes)
            return {k: f.get_tensor(k) for k in shapes}
    except CheckpointError:
        raise
    except Exception as exc:  # corrupt / truncated file
        raise CheckpointError(f"cannot read {path}: {type(exc).__name__}: {exc}".splitlines()[0]) from None


def read_state_file(path: Path, allow_pickle: bool, refuse_hint: str = "") -> dict[str, Any]:
    """What a weights file from elsewhere holds (an authors' release, a pretrained file): a
    safetensors file through `read_weights`; a pickle only with `allow_pickle`, and then through
    `torch.load(weights_only=True)` (tensors and plain containers only: a pickle can run code)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint file {path} not found")
    if path.suffix == ".safetensors":
        return read_weights(path)
    if not allow_pickle:
        raise CheckpointError(f"{path} is a pickle (torch.save), which can run code when loaded; {refuse_hint}")
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # not a pickle, or one holding more than tensors and containers
        raise CheckpointError(f"cannot read {path} with torch.load(weights_only=True): "
                              f"{type(exc).__name__}: {exc}".splitlines()[0]) from None
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path} holds a {type(obj).__name__}, not a dict")
    return obj


def state_dict_in(obj: Mapping[str, Any], key: str, where: str, what: str = "") -> dict[str, Any]:
    """The state dict of tensors in what a file held: `obj[key]` when that is a dict, else `obj`
    itself; DDP's / DataParallel's `module.` prefix dropped. CheckpointError naming the file and
    its top-level keys when it holds no such thing."""
    import torch

    state = obj[key] if isinstance(obj.get(key), dict) else obj
    if not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
        keys = ", ".join(sorted(map(str, obj))[:6])
        raise CheckpointError(f"{where} has no {key!r} state dict of tensors{what} (top-level keys: {keys})")
    return {k.removeprefix("module."): v for k, v in state.items()}


# -- the description ----------------------------------------------------------------------------
@dataclass
class Checkpoint:
    """What a method checkpoint's config.json says (format 2; see the module docstring)."""

    method: str
    backbone: str | None
    embed_dim: int
    arch: dict = field(default_factory=dict)
    chord_lambda: float | None = None  # None: none was chosen (the method uses the default λ)
    token_width: int | None = None
    lambda_search: dict | None = None
    lambda_repicked: dict | None = None
    metrics: dict = field(default_factory=dict)
    training: dict = field(default_factory=dict)
    git_commit: str | None = None
    extra: dict = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    ORDER = ("method", "format_version", "backbone", "embed_dim", "token_width", "arch", "chord_lambda",
             "lambda_search", "lambda_repicked", "metrics", "training", "git_commit", "extra")
    OPTIONAL = ("token_width", "lambda_search", "lambda_repicked")  # left out of the JSON when None

    def to_json(self) -> dict[str, Any]:
        """The config.json object, keys in the documented order, empty optional ones left out."""
        out = {k: getattr(self, k) for k in self.ORDER}
        return {k: v for k, v in out.items() if not (k in self.OPTIONAL and v is None)}

    @classmethod
    def from_json(cls, data: Any, where: str) -> "Checkpoint":
        """A config.json object of any format (format 1 migrated); CheckpointError naming `where`
        and the key for an unknown key, a missing one or a value of the wrong type."""
        if not isinstance(data, dict):
            raise CheckpointError(f"{where} holds a JSON {type(data).__name__}, not an object")
        version = data.get("format_version", 1)
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise CheckpointError(f"{where} has format_version {version!r}; this version reads formats up to "
                                  f"{FORMAT_VERSION} (update the workbench)")
        if version < 2:
            data = migrate_v1(data)
        known = {f.name for f in fields(cls)}
        unknown = sorted(k for k in data if k not in known)
        if unknown:
            raise CheckpointError(f"{where}: unknown key(s) {unknown} (method-specific values go under 'extra')")
        for key in ("method", "embed_dim"):
            if key not in data:
                raise CheckpointError(f"{where} has no {key!r}")
        none = type(None)
        types: dict[str, type | tuple[type, ...]] = {
            "method": str, "embed_dim": int, "arch": dict, "metrics": dict, "training": dict, "extra": dict,
            "chord_lambda": (int, float, none), "token_width": (int, none), "lambda_search": (dict, none),
            "lambda_repicked": (dict, none)}
        for key, want in types.items():
            if key in data and (isinstance(data[key], bool) or not isinstance(data[key], want)):
                raise CheckpointError(f"{where}: key {key!r} is {data[key]!r}, not {_type_name(want)}")
        out = cls(**{k: v for k, v in data.items() if k != "format_version"})
        if out.chord_lambda is not None:
            out.chord_lambda = float(out.chord_lambda)
        return out

    def write(self, folder: Path) -> None:
        """config.json into `folder`, atomically."""
        obj = self.to_json()
        atomic_write(Path(folder) / CONFIG, lambda f: f.write(json.dumps(obj, indent=1, default=str)), False)


def _type_name(want: type | tuple[type, ...]) -> str:
    kinds = want if isinstance(want, tuple) else (want,)
    return " or ".join("null" if k is type(None) else k.__name__ for k in kinds)


CORE_V1 = ("method", "backbone", "embed_dim", "token_width", "arch", "chord_lambda", "metrics",
           "git_commit", "lambda_repicked", "format_version")


def migrate_v1(data: Mapping[str, Any]) -> dict[str, Any]:
    """A format-1 config.json as format 2: the recipe (`hparams`, PACT's `training`) under
    `training`; the λ search (PACT's at the top, the others' inside `metrics`) under
    `lambda_search`; everything else the method wrote itself (prompt, placeholder, replace,
    objective, converted_from, a user's own keys) under `extra`."""
    out = {k: data[k] for k in CORE_V1 if k in data}
    out["format_version"] = FORMAT_VERSION
    metrics = dict(data.get("metrics") or {})
    inner = metrics.pop("lambda_search", None)
    search = data.get("lambda_search", inner)
    if "lambda_search" in data and inner is not None:  # both: the top-level one is the record
        metrics["lambda_search"] = inner
    out["metrics"] = metrics
    if search is not None:
        out["lambda_search"] = search
    extra = {k: v for k, v in data.items() if k not in CORE_V1 and k not in ("training", "hparams", "lambda_search")}
    recipe = data.get("training", data.get("hparams"))
    if "training" in data and "hparams" in data:
        extra["hparams"] = data["hparams"]
    out["training"] = dict(recipe or {})
    out["extra"] = extra
    return out


def read_checkpoint(folder: Path) -> Checkpoint:
    """The description in a checkpoint folder's config.json (any format), with a one-line
    CheckpointError when it is missing, not JSON, or not a checkpoint description."""
    path = Path(folder) / CONFIG
    if not path.is_file():
        raise CheckpointError(f"no method checkpoint at {folder} (config.json missing)")
    try:
        data = loads_json(path.read_text())
    except ValueError as e:
        raise CheckpointError(f"{path} is not valid JSON: {e}") from None
    return Checkpoint.from_json(data, str(path))


def load_checkpoint(folder: Path, methods: Sequence[str], backbone: Encoder, need: Mapping[str, Any]) -> Checkpoint:
    """A checkpoint folder's description, checked before any weight is read: written by one of
    `methods`, equal to `need` on each key (embedding dimension, token width: CheckpointError
    naming both values) and made under the backbone's activation (QuickGELU or GELU); another
    backbone with the same widths only warns (it runs, but means little)."""
    ck = read_checkpoint(folder)
    if ck.method not in methods:
        raise CheckpointError(f"{folder} holds a {ck.method!r} checkpoint, not {' or '.join(map(repr, methods))}")
    made, runs = activation(ck.backbone), activation(backbone.id)
    if made != runs:  # the same weights under another activation: every feature differs
        raise CheckpointError(f"{methods[0]} checkpoint {folder} was made on backbone {ck.backbone} "
                              f"({made}) but backbone {backbone.id} runs {runs}: retrain or re-convert it "
                              "on this backbone")
    for key, have in need.items():
        if getattr(ck, key) != have:
            raise CheckpointError(f"{methods[0]} checkpoint {folder} was made for {key}={getattr(ck, key)} "
                                  f"(backbone {ck.backbone}) but backbone {backbone.id} has {key}={have}")
    if ck.backbone != backbone.id:
        log.warning("%s checkpoint %s was trained on backbone %s, loading it on %s",
                    methods[0], folder, ck.backbone, backbone.id)
    return ck


def load_weights(folder: Path, expected: Mapping[str, tuple], what: str) -> dict:
    """A checkpoint folder's tensors, refused (file, key and both shapes named) unless they are
    exactly `expected`'s keys and shapes."""
    path = Path(folder) / WEIGHTS
    return read_weights(path, lambda shapes: check_fit(shapes, expected, str(path), what))


def save_checkpoint(folder: Path, ck: Checkpoint, state: Mapping[str, Any]) -> Path:
    """`model.safetensors` (`state`) then `config.json` (`ck`) into `folder` (created), each
    written atomically: a reader never sees half a file."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_weights(folder / WEIGHTS, state, {"method": ck.method})
    ck.write(folder)
    return folder


def upgrade(folder: Path) -> bool:
    """Rewrite a checkpoint folder's config.json in the current format (its weights untouched);
    False when it already is."""
    path = Path(folder) / CONFIG
    ck = read_checkpoint(folder)
    if loads_json(path.read_text()).get("format_version") == FORMAT_VERSION:
        return False
    ck.write(folder)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Rewrite method checkpoints' config.json in the current format "
                                 "(format 1 -> 2); the weights are not touched.")
    ap.add_argument("command", choices=("upgrade",))
    ap.add_argument("folders", nargs="+", type=Path)
    args = ap.parse_args(argv)
    try:
        for folder in args.folders:
            print(f"{folder}: {'upgraded to format ' + str(FORMAT_VERSION) if upgrade(folder) else 'already current'}")
    except CheckpointError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
