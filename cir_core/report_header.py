"""The one header of the project's JSON reports: what was measured (benchmark, split, backbone,
checkpoints), with which code (git commit, whether the tree was dirty, package versions), where
(device, machine, its load) and when (UTC). A report is `{"header": report_header(...), ...}`, so
a reader (a comparison, a seed table, a docs page) finds these in one place under one name.

    from cir_core.report_header import report_header
    header = report_header(benchmark="cirr", split="val", backbone=backbone.id,
                           checkpoints={"searle": "ckpt/searle-vit-l-14"}, device="cuda")

Everything is optional but the fields the header measures itself (commit, versions, date, load);
`extra` fields a report needs beside these go in as they are, after the standard ones.
"""
from __future__ import annotations

import os
import platform
import sys
import time
from importlib import metadata
from typing import Any, Mapping, Sequence

from .config import git_commit, git_dirty

HEADER_VERSION = 1
# The distributions whose versions can change a number (cir_core's own is the commit).
PACKAGES = ("torch", "torchvision", "open_clip_torch", "numpy", "faiss-cpu", "pillow", "safetensors",
            "huggingface_hub")
JSONScalar = str | int | float | bool | None
JSONValue = JSONScalar | Sequence["JSONValue"] | Mapping[str, "JSONValue"]


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution (None: not installed), and Python's."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def device_name(device: str) -> str:
    """`device` as a reader needs it: a CUDA device with its GPU's name ("cuda:0 (NVIDIA H100 80GB
    HBM3)"); anything else as given. Imports torch only for a CUDA device."""
    if not device.startswith("cuda"):
        return device
    import torch

    if not torch.cuda.is_available():
        return f"{device} (no CUDA device visible)"
    index = int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()
    return f"cuda:{index} ({torch.cuda.get_device_name(index)})"


def machine_load() -> dict[str, float | int | None]:
    """The load averages over 1, 5 and 15 minutes and the CPU count (None where the OS has none)."""
    one: float | None
    five: float | None
    fifteen: float | None
    try:
        one, five, fifteen = (round(x, 2) for x in os.getloadavg())
    except OSError:
        one = five = fifteen = None
    return {"load_1m": one, "load_5m": five, "load_15m": fifteen, "cpus": os.cpu_count()}


def this_command() -> list[str]:
    """This process's command line as a reader would type it, without the machine's paths:
    `python -m cir_core.reproduce run ...` for a module, the script's file name otherwise."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    head = (["python", "-m", spec.name.removesuffix(".__main__")] if spec is not None and spec.name
            else [os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"])
    return [*head, *sys.argv[1:]]


def report_header(*, benchmark: str | None = None, split: str | None = None, backbone: str | None = None,
                  checkpoints: Mapping[str, str] | None = None, device: str = "cpu",
                  command: Sequence[str] | None = None, **extra: JSONValue) -> dict[str, JSONValue]:
    """The header of a JSON report: the fields given, plus the commit, versions, machine, date and
    load measured now. `command` defaults to this process's argv; `extra` is appended as given."""
    header: dict[str, JSONValue] = {
        "header_version": HEADER_VERSION,
        "benchmark": benchmark, "split": split, "backbone": backbone,
        "checkpoints": dict(checkpoints) if checkpoints is not None else None,
        "commit": git_commit(), "dirty": git_dirty(),
        "versions": package_versions(),
        "device": device_name(device),
        "machine": {"platform": platform.platform(), "processor": platform.machine()},
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load": machine_load(),
        "command": " ".join(command if command is not None else this_command()),
    }
    clash = sorted(set(extra) & set(header))
    if clash:
        raise TypeError(f"report_header: {clash[0]!r} is a standard field; pass it by its keyword")
    header.update(extra)
    return header


def with_header(report: Mapping[str, JSONValue], **fields: Any) -> dict[str, JSONValue]:
    """`report` with its `header` first: `report_header(**fields)` (`fields`: its keywords), where
    benchmark, split, backbone and checkpoints not given are read from the report's own keys of
    those names."""
    given: dict[str, Any] = {k: report.get(k) for k in ("benchmark", "split", "backbone", "checkpoints")
                             if fields.get(k) is None and isinstance(report.get(k), (str, dict))}
    return {"header": report_header(**{**given, **fields}), **{k: v for k, v in report.items() if k != "header"}}


def write_report(path: str | os.PathLike[str], report: Mapping[str, JSONValue], *, allow_nan: bool = True,
                 **fields: Any) -> None:
    """Write a JSON report with its header (`with_header`), whole or not at all."""
    import json
    from pathlib import Path

    from .fileio import atomic_write

    text = json.dumps(with_header(report, **fields), indent=1, ensure_ascii=False, allow_nan=allow_nan) + "\n"
    atomic_write(Path(path), lambda f: f.write(text), binary=False)
