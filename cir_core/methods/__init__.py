"""Composition methods, registered by name (timm-style): `list_methods()`, `create_method(...)`.

Importing this package registers the built-in methods, in the order of the app's columns and of
the evaluation tables (baselines first, then PACT, DiCE, PACE, compose-only), then every other
module of the package (by name): a new method is one file here with `@register_method`.
"""
import importlib
import pkgutil

from . import baselines  # noqa: F401  (registers the baselines first)
from . import pact  # noqa: F401
from . import dice, pace  # noqa: F401
from . import compose_only  # noqa: F401
from .base import (Method, default_baseline, default_columns, extra_methods, get_method_class, list_methods,
                   method_label, optional_methods, register_method, shown_methods, split_baseline,
                   unregister_method)
from .factory import create_method, default_checkpoint

for _m in sorted(m.name for m in pkgutil.iter_modules(__path__)):  # a method module added later
    importlib.import_module(f"{__name__}.{_m}")

__all__ = ["Method", "register_method", "unregister_method", "list_methods", "get_method_class",
           "method_label", "default_columns", "default_baseline", "optional_methods", "split_baseline",
           "shown_methods", "extra_methods",
           "create_method", "default_checkpoint"]
