"""studies.peer_capacity's inversion on a random-init tiny backbone: one token optimised through
the frozen text tower moves towards its target image, and the module's imports resolve (a rename
in the pseudo-word module once broke it only at the end of a rebuild)."""
import torch
import torch.nn.functional as F

from cir_core.methods.pseudoword import PseudoWord
from studies.peer_capacity import encode_with, invert


def test_inversion_brings_the_token_towards_its_image(tiny_backbone):
    bb = tiny_backbone
    text = PseudoWord(bb.tokenizer, bb.model, "$")
    before = encode_with(text, ["a photo of $"] * 3, torch.zeros(3, text.width))
    targets = F.normalize(torch.randn(3, before.shape[1], generator=torch.Generator().manual_seed(0)), dim=-1)
    w = invert(text, targets, "a photo of $", steps=40, lr=5e-2)
    after = encode_with(text, ["a photo of $"] * 3, w)
    cos_before = (torch.from_numpy(before) * targets).sum(1)
    cos_after = (torch.from_numpy(after) * targets).sum(1)
    assert w.shape == (3, text.width)
    assert bool((cos_after > cos_before + 0.05).all()), (cos_before, cos_after)


def test_every_deferred_import_resolves():
    """run() imports inside its body (to start fast); each name it imports must exist."""
    import ast
    import importlib
    from pathlib import Path

    import studies.peer_capacity as mod

    tree = ast.parse(Path(mod.__file__).read_text())
    found = [(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
             and n.module.startswith(("cir_core", "training")) for a in n.names]
    assert found
    missing = [f"{m}.{a}" for m, a in found if not hasattr(importlib.import_module(m), a)]
    assert not missing, missing
