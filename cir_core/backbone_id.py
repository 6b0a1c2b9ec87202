"""What a backbone's id string says, without building anything (so the methods' checkpoint
checks and the app's notices can read it without importing open_clip).

An id is `<model name>@<weights>[+quickgelu]`: `ViT-L-14@openai+quickgelu`,
`cir-tiny-vit@local:<weights hash>`, `ViT-B-32@random-seed0`.
"""
from __future__ import annotations

QUICKGELU = "+quickgelu"  # the id's mark of a model built with QuickGELU (`backbone.load_backbone`)
# the project's own world-trained model configs: a backbone of these knows only the generated world
WORLD_MODELS = ("cir-tiny-vit", "cir-tiny-rn")


def activation(backbone_id: str | None) -> str:
    """The activation a backbone id says its model runs: "quickgelu" (the id's `+quickgelu` mark,
    or a `*-quickgelu` model name) or "gelu". An id written before the mark existed for a tag
    whose weights need QuickGELU (`ViT-L-14@openai`) says "gelu": that model ran the wrong one."""
    ident = backbone_id or ""
    quick = ident.endswith(QUICKGELU) or ident.split("@")[0].endswith("-quickgelu")
    return "quickgelu" if quick else "gelu"


def is_world_backbone(backbone_id: str | None) -> bool:
    """Whether an id (`name@local:hash`, `name@random-seedN`) is one of the world's own models."""
    return (backbone_id or "").split("@")[0] in WORLD_MODELS
