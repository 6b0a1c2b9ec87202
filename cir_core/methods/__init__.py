"""Composition methods, registered by name (timm-style): `list_methods()`, `create_method(...)`.

Importing this package imports every module in it (by name), and each registers its own methods
with `@register_method`: a new method is one file here. The app's columns and the evaluation
tables list them by each class's declared `order` (baselines first, then PACT, DiCE, PACE,
compose-only, then the zero-shot peers), not by import order.
"""
import importlib
import pkgutil

from .base import (
    Method,
    default_baseline,
    default_columns,
    extra_methods,
    get_method_class,
    list_methods,
    method_label,
    optional_methods,
    register_method,
    shown_methods,
    split_baseline,
    unregister_method,
)
from .factory import create_method, default_checkpoint

for _m in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_m}")

__all__ = ["Method", "register_method", "unregister_method", "list_methods", "get_method_class",
           "method_label", "default_columns", "default_baseline", "optional_methods", "split_baseline",
           "shown_methods", "extra_methods",
           "create_method", "default_checkpoint"]
