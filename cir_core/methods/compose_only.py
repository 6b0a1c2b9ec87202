"""compose-only: PACT's architecture trained with L_compose alone (seed 000, Table 3), its own
column in the app: the difference from PACT is what L_preserve buys."""
from __future__ import annotations

from .base import register_method
from .pact import PACT


@register_method
class ComposeOnly(PACT):
    name = "compose-only"
    label = "compose-only"
    order = 13
    description = "PACT's architecture trained with L_compose alone (Table 3 ablation)"
