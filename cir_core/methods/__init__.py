"""Composition methods, registered by name (timm-style): `list_methods()`, `create_method(...)`."""
from . import baselines  # noqa: F401  (registers the baselines first)
from . import dice, pace  # noqa: F401
from . import pact  # noqa: F401
from .base import Method, get_method_class, list_methods, register_method
from .factory import create_method, default_checkpoint

__all__ = ["Method", "register_method", "list_methods", "get_method_class", "create_method",
           "default_checkpoint"]
