"""The command-line pieces the studies share (`--checkpoint METHOD=DIR` read and checked before
anything is embedded). Studies import the product, never the reverse; what several studies need
lives here, not in one study that the others would import."""
from __future__ import annotations

import argparse
from pathlib import Path

from cir_core.errors import InputError


def checkpoint_arg(ap: argparse.ArgumentParser, text: str) -> tuple[str, str]:
    """One --checkpoint METHOD=DIR as (method, folder); a malformed one is the parser's error."""
    from cir_core.settings import checkpoint_pair

    try:
        return checkpoint_pair(text)
    except InputError as e:
        ap.error(str(e))


def checkpoint_args(ap: argparse.ArgumentParser, pairs: list[tuple[str, str]], names: list[str],
                 other_backbone: bool) -> dict[str, str | None]:
    """{trained method: its checkpoint folder, None for the shipped one}, every pair checked before
    anything is embedded: a method not asked for or named twice, one that takes no checkpoint, a
    folder that is not there, and (on another backbone) a trained method left on the shipped
    checkpoint, which was trained on the shipped backbone, are refused by name."""
    from cir_core.methods.base import get_method_class

    given = dict(pairs)
    if len(given) < len(pairs):
        ap.error("--checkpoint names a method twice")
    if set(given) - set(names):
        ap.error(f"--checkpoint for a method not in --methods: {', '.join(sorted(set(given) - set(names)))}")
    out: dict[str, str | None] = {}
    for name in names:
        try:
            trained = get_method_class(name).needs_checkpoint
        except InputError as e:
            ap.error(str(e))
        if name in given and not trained:
            ap.error(f"--checkpoint {name}=...: {name} takes no checkpoint")
        if name in given and not Path(given[name]).is_dir():
            ap.error(f"--checkpoint {name}={given[name]}: no such folder")
        if trained and other_backbone and name not in given:
            ap.error(f"{name}: the shipped checkpoint was trained on the shipped backbone; "
                     f"with --backbone give --checkpoint {name}=DIR")
        if trained:
            out[name] = given.get(name)
    return out
