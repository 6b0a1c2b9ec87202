"""The annotation guidelines, written once: the Annotate tab shows them and the published
dataset's card quotes them. The questions' own lines come from their declarations
(db/questions.py), so a new question is in the guidelines as soon as it is declared."""
from __future__ import annotations

from db import questions as q_registry

CHARACTER = """**Who "the character" is** — what the answers are checked against:

- **MovieNet frames** (and the film world): the person in the **amber box** on the reference, named
  on the box (the credited cast member). Other people on the reference do not count. The
  candidate shows the same character when that person is in it, in any shot, pose, outfit or
  lighting, among any others; candidates carry no box, so look for the person yourself.
- **The generated world**: a character *is* its **body colour and hat** (24 characters: 6 body
  colours × 4 hats: top hat, crown, horns, antenna; the name is only a label for that pair). Same
  body colour *and* same hat → same character, whatever the position, facing, size, background or
  objects. Any other body colour, or any other hat → a different character."""

POINTWISE_NOTES = """The identity and edit questions are independent: a different character can satisfy the edit
(Identity: different, Edit: satisfied), and the unchanged reference re-shot fails it (Identity:
same, Edit: not satisfied).

Examples (generated world): reference *Ada — teal body, top hat — on a beach with a red square*,
edit *"Make the square blue."*
- teal body, top hat, beach, blue square → Same character · Edit satisfied.
- teal body, top hat, beach, red square → Same character · Not satisfied (nothing changed).
- teal body, **crown**, beach, blue square → Different character (another hat) · Edit satisfied.
- **pink** body, top hat, beach, blue square → Different character (another body colour) · Edit satisfied.
- teal body, top hat, beach, purple square → Same character · Partly (approximately the asked colour).

The worked examples below are the world's own ground truth, labelled with each figure's look."""

KEYS = """**Skip [S]** with a reason (choose it in the list beside the button) when you cannot judge; **Back [B]** revisits your previous answer (changing it
keeps the old one in the audit log); **Next [N]** returns to your first unanswered pair.
Your answers are yours: nobody else sees or changes them, and you never see which method found a candidate."""


def guidelines(mode: str = "pointwise", asked: tuple[q_registry.Question, ...] | None = None) -> str:
    """The guidelines for a set of `mode` asking `asked` (default: every question of the mode)."""
    qs = asked if asked is not None else tuple(q for q in q_registry.QUESTIONS.values() if q.mode == mode)
    n = len(qs)
    head = (f"**For each pair answer {'the question' if n == 1 else f'{n} questions'}** (click, or press the "
            "key shown on the button; a question asked only in some sets says so on screen):")
    parts = [head, q_registry.guidelines(qs), CHARACTER]
    if mode == "pointwise":
        parts.append(POINTWISE_NOTES)
    return "\n\n".join(parts + [KEYS])


GUIDELINES = guidelines("pointwise") + "\n\n" + q_registry.guidelines(q_registry.core("pairwise")).replace(
    "1. ", "In a **pairwise** set (two candidates, A and B) the one question is: ", 1)
