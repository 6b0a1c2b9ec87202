"""What a registered row needs to run (its data, the backbone's weights, its checkpoint, an LLM,
the evaluation server, a GPU), where each comes from, and whether it is on this machine.

`needs(reg, row)` is the static list (docs/REPRODUCE.md's status); `check(reg, row, sources)` the
same, each need looked for where this run was told to look (`Sources`: --root, --checkpoints,
--checkpoint, --device). A need that is `blocking` and missing makes `run` skip the row with the
need's text as the reason; the server and the GPU never block (a test split without ground truth
gets its submission file written; a CPU run is slow, not wrong).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from cir_core import env
from cir_core.paths import REPO_ROOT

from .registry import Backbone, Checkpoint, Registry, Row


@dataclass(frozen=True)
class Sources:
    """Where this run looks for a row's inputs."""

    data_root: Path | None = None  # DATA: a dataset `key` is DATA/<key>
    data: dict[str, Path] = field(default_factory=dict)  # dataset key -> folder (--root KEY=DIR)
    checkpoints: Path | None = None  # --checkpoints DIR: a checkpoint is DIR/<its folder>
    checkpoint: dict[str, Path] = field(default_factory=dict)  # checkpoint key -> folder (--checkpoint KEY=DIR)
    device: str = "cpu"

    def data_dir(self, key: str) -> Path | None:
        if key in self.data:
            return self.data[key]
        return self.data_root / key if self.data_root is not None else None

    def checkpoint_dir(self, ck: Checkpoint) -> Path | None:
        """The folder of checkpoint `ck` for this run (None: it takes none, or none was said)."""
        if ck.key in self.checkpoint:
            return self.checkpoint[ck.key]
        if ck.kind == "shipped":
            return REPO_ROOT / str(ck.folder)
        if ck.kind in ("release", "recipe", "unreleased") and self.checkpoints is not None:
            return self.checkpoints / str(ck.folder)
        return None


@dataclass(frozen=True)
class Need:
    what: str  # data | weights | checkpoint | llm | server | gpu
    short: str  # for a status line: "weights ViT-L-14 openai"
    text: str  # what it is and where to get it
    blocking: bool = True
    ok: bool | None = None  # looked for here: found / missing; None: not looked for


def backbone_spec(bb: Backbone) -> str:
    """The backbone's open_clip model argument, a relative `local-dir:` folder taken from the repo."""
    if bb.model.startswith("local-dir:") and not Path(bb.model[len("local-dir:"):]).is_absolute():
        return f"local-dir:{REPO_ROOT / bb.model[len('local-dir:'):]}"
    return bb.model


def needs(reg: Registry, row: Row) -> list[Need]:
    """What `row` needs, each with where to get it (nothing looked up on this machine)."""
    ds, bb, ck = reg.datasets[row.data], reg.backbones[row.backbone], reg.checkpoints[row.checkpoint]
    out = [Need("data", f"data ({row.data})", f"{row.data} ({row.benchmark} {row.split}): "
                + (f"python -m cir_core.world.export {export_args(ds.export, row.data)}" if ds.export else
                   f"get {ds.get}; layout {ds.layout}"))]
    if bb.pretrained is not None:
        out.append(Need("weights", f"weights {bb.model} {bb.pretrained}",
                        f"open_clip {bb.model!r} pretrained={bb.pretrained!r} (the paper's {bb.paper_name}"
                        + ("" if bb.stated else "; the tag is read, not printed: docs/REPRODUCE.md, Backbones")
                        + ")"))
    if ck.kind == "release":
        out.append(Need("checkpoint", "checkpoint (release)", f"{ck.where}; then {ck.convert}"))
    elif ck.kind == "recipe":
        out.append(Need("checkpoint", "checkpoint (train it)", f"train it: {ck.train}"))
    elif ck.kind == "unreleased":
        out.append(Need("checkpoint", "checkpoint (unreleased)", f"not released: {ck.why}"))
    elif ck.kind == "shipped":
        out.append(Need("checkpoint", "checkpoint (shipped)", f"the shipped {ck.folder}"))
    elif ck.kind == "llm":
        out.append(Need("llm", "LLM endpoint", str(ck.needs)))
    if row.split == "test" and ds.server:
        out.append(Need("server", "evaluation server", f"test ground truth is on the server: the run writes "
                        f"the submission file; upload it at {ds.server}", blocking=False))
    if bb.gpu:
        out.append(Need("gpu", "GPU", f"a GPU ({bb.gpu}); --device cuda", blocking=False))
    return out


def export_args(export: dict | None, key: str) -> str:
    """The `python -m cir_core.world.export` arguments of a rehearsal dataset."""
    e = dict(export or {})
    args = [e.pop("format"), "--split", e.pop("split")]
    for k, v in e.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    return " ".join(args) + f" --out DATA/{key}"


def check(reg: Registry, row: Row, sources: Sources) -> list[Need]:
    """`needs(reg, row)`, each looked for where `sources` says."""
    bb, ck = reg.backbones[row.backbone], reg.checkpoints[row.checkpoint]
    out = []
    for n in needs(reg, row):
        if n.what == "data":
            d = sources.data_dir(row.data)
            ok = d is not None and d.is_dir() and any(d.iterdir())
            n = replace(n, ok=ok, text=n.text if ok else f"no folder {d if d else '(give --root DATA)'}; " + n.text)
        elif n.what == "weights":
            ok = weights_here(bb)
            n = replace(n, ok=ok, text=n.text if ok else "not in the local cache: " + n.text)
        elif n.what == "checkpoint":
            d = sources.checkpoint_dir(ck)
            ok = d is not None and (d / "config.json").is_file()
            n = replace(n, ok=ok, text=n.text if ok else f"no checkpoint folder "
                        f"{d if d else '(give --checkpoints DIR or --checkpoint ' + ck.key + '=DIR)'}; " + n.text)
        elif n.what == "llm":
            n = replace(n, ok=bool(env.read("CIR_CIREVL_ENDPOINT")))
        elif n.what == "gpu":
            n = replace(n, ok=sources.device.startswith("cuda"))
        out.append(n)
    return out


def weights_here(bb: Backbone) -> bool:
    """Whether the backbone's weights are on this machine (random init and local folders: yes)."""
    if bb.pretrained is None:
        return True
    from cir_core.backbone import cached_weights

    if Path(bb.pretrained).expanduser().is_file():
        return True
    return cached_weights(bb.model, bb.pretrained) is not None


def status(reg: Registry, row: Row) -> str:
    """The row's static status: what it needs beyond this repository, or that it was reproduced
    here (a rehearsal row, whose values were recorded on the project's machine)."""
    if reg.kind == "rehearsal":
        return "reproduced here (rehearsal)"
    return "needs " + ", ".join(n.short for n in needs(reg, row))
