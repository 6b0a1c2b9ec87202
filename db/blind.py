"""What keeps annotation blind: every order, placement and id an annotator can see comes from the
query set's own secret key (`QuerySet.secret`), never from the gallery's layout or a public seed.

- `order`: the annotator's queue order — queries shuffled, then each query's items — keyed by
  (set key, annotator). The old seed was the annotator's and the set's names: an annotator could
  replay it and, since the shuffle started from item ids sorted, read each pair's place in the
  gallery's id order back from the queue (on the generated world the target is the reference's
  id + 1, so the order gave away the target and the gold answers).
- `uniform`: keyed numbers for which gold pairs an annotator is given (`db.queue.open_tasks`: in
  each query, about the set's gold share of the plain pairs they get, at random places in the
  query's block; never a query of gold pairs alone, never a queue of them).
- `opaque_id`: the ids an annotator's own export carries instead of item ids, query ids and task
  ids: a keyed hash, unrelated to the gallery's order or the pooling's.
"""
from __future__ import annotations

import hashlib
import hmac
import random
from typing import Hashable, Sequence

KEY_BYTES = 32


def _mac(secret: str, *parts: object) -> bytes:
    if not isinstance(secret, str) or len(secret) < 32:
        # Never fall back to a public seed: a set without its key is a schema error.
        raise ValueError("a query set needs its secret key (db migration 0002) to be annotated blind")
    msg = "\x00".join(str(p) for p in parts).encode("utf-8")
    return hmac.new(secret.encode("ascii"), msg, hashlib.sha256).digest()


def order(secret: str, annotator: str,
          groups: dict[Hashable, Sequence[Hashable]]) -> list[tuple[Hashable, Hashable]]:
    """(group, member) pairs: the groups (queries) in a keyed random order, each group's members
    (items) shuffled within it.

    Grouping by query keeps one reference + edit on screen for several candidates and completes
    whole queries early (per-query rates need that). Groups and members are sorted first, so
    the result depends on what they are, not on how the caller listed them."""
    rng = random.Random(int.from_bytes(_mac(secret, "order", annotator)[:16], "big"))
    keys = sorted(groups, key=repr)
    rng.shuffle(keys)
    out: list[tuple[Hashable, Hashable]] = []
    for k in keys:
        members = sorted(groups[k], key=repr)
        rng.shuffle(members)
        out += [(k, m) for m in members]
    return out


def uniform(secret: str, *parts: object) -> float:
    """A keyed number in [0, 1) for `parts` (e.g. which gold pairs of a query an annotator gets)."""
    return int.from_bytes(_mac(secret, "u", *parts)[:8], "big") / 2.0 ** 64


def opaque_id(secret: str, kind: str, value: object, length: int = 12) -> str:
    """`kind`-`value` as a keyed hash (hex): stable for the set, unrelated to any order."""
    return _mac(secret, "id", kind, value).hex()[:length]
