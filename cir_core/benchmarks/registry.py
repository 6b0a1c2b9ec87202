"""Benchmarks registered by name, as methods are: a benchmark module decorates its `load(root,
split, ...)` with `@register_benchmark(name)`; importing `cir_core.benchmarks` imports every module
of the package, so a new benchmark is one file."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .common import BenchmarkError


@dataclass(frozen=True)
class BenchmarkEntry:
    """A registered benchmark: its loader, and whether it is generated (no files, no --root;
    default split test) or read from files (default split val)."""

    name: str
    load: Callable[..., Any]
    generated: bool = False
    description: str = ""


_REGISTRY: dict[str, BenchmarkEntry] = {}


def register_benchmark(name: str, description: str = "", generated: bool = False) -> Callable:
    """Decorator for a benchmark module's `load(root, split, **options)`."""
    def add(load: Callable[..., Any]) -> Callable[..., Any]:
        if name in _REGISTRY and _REGISTRY[name].load is not load:
            raise ValueError(f"benchmark name {name!r} registered twice")
        _REGISTRY[name] = BenchmarkEntry(name, load, generated, description)
        return load
    return add


def get_benchmark(name: str) -> BenchmarkEntry:
    if name not in _REGISTRY:
        raise BenchmarkError(f"unknown benchmark {name!r}; choose from {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def list_benchmarks() -> list[str]:
    """Registered benchmark names, in registration order (the world first)."""
    return list(_REGISTRY)
