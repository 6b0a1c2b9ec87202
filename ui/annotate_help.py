"""What the Annotate tab teaches and how its keys work: the guidelines, worked examples from the
world's ground truth, and the page script that maps keys to the buttons (keys shown on them)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cir_core.engine import Engine

KEYS = {"1": "ann-id-yes", "2": "ann-id-no", "3": "ann-id-cant_tell", "q": "ann-edit-yes",
        "w": "ann-edit-partial", "e": "ann-edit-no", "s": "ann-skip", "b": "ann-back", "n": "ann-next"}

GUIDELINES = """
**For each pair answer two questions** (click, or press the key shown on the button):

1. **Identity** — does the *candidate* show the **same character** as the reference?
   Judge the person/character, not the pose, position, clothes colour or background.
   *Can't tell* only when the character is not visible enough to decide.
2. **Edit** — does the candidate satisfy **the edit text** applied to the reference?
   *Satisfied*: every change asked for is there and nothing else asked to stay was changed.
   *Partly*: some of the requested changes are there, or one is there only approximately.
   *Not satisfied*: none of them, or the candidate contradicts the edit.

The two questions are independent: a different character can satisfy the edit (Identity: different,
Edit: satisfied), and the unchanged reference re-shot fails it (Identity: same, Edit: not satisfied).

Examples (generated world): reference *Ada on a beach with a red square*, edit *"Make the square blue."*
- Ada, beach, blue square → Same character · Edit satisfied.
- Ada, beach, red square → Same character · Not satisfied (nothing changed).
- Bo, beach, blue square → Different character · Edit satisfied.
- Ada, beach, purple square → Same character · Partly (approximately the asked colour).

**Skip [S]** with a reason when you cannot judge; **Back [B]** revisits your previous answer (changing it
keeps the old one in the audit log); **Next [N]** returns to your first unanswered pair.
Your answers are yours: nobody else sees or changes them, and you never see which method found a candidate.
"""

HOTKEY_JS = """
<script>
(() => {
  const keys = %s;
  document.addEventListener('keydown', (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.repeat) return;
    const t = e.target;
    if (t && (t.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(t.tagName))) return;
    const id = keys[e.key.toLowerCase()];
    if (!id) return;
    let el = document.getElementById(id);
    if (el && el.tagName !== 'BUTTON') el = el.querySelector('button') || el;
    if (!el || !el.checkVisibility() || el.disabled) return;  // only on the Annotate tab
    e.preventDefault();
    el.click();
  });
})();
</script>
""" % ("{" + ", ".join(f'"{k}": "{v}"' for k, v in KEYS.items()) + "}")



def guideline_examples(engine: Engine, size: int = 200) -> list[tuple[Any, str]]:
    """Worked examples for the guidelines from the world's first query: the reference, then each
    candidate of its hard subset with the answers the world's ground truth gives. Empty when the
    gallery is not the generated world (there is no ground truth to show)."""
    bench = engine.view.bench
    if bench is None or not bench.queries:
        return []
    ref, q = bench.reference_idx[0], bench.queries[0]
    ids, ok = bench.identities(), bench.edit_ok_sets()[0]
    out = [(engine.view.image(ref, size), f"Reference · edit: “{q.text}”")]
    for row in bench.subsets[0]:
        same = ids[row] == ids[ref]
        if row == bench.target_idx[0]:
            label = "Same character · Edit satisfied (the target)"
        elif row in ok:
            label = ("Same" if same else "Different") + " character · Edit satisfied"
        elif bench.items[row].scene.key() == bench.items[ref].scene.key():
            label = "Same character · Not satisfied (nothing changed)"
        else:
            label = ("Same" if same else "Different") + " character · Partly or not: a change is missing or wrong"
        out.append((engine.view.image(row, size), label))
    return out
