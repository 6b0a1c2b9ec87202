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

1. **Identity** — does the *candidate* show **the reference's character** anywhere in the frame?
   *Can't tell* only when the candidate is too small, cut off or hidden to decide.
2. **Edit** — does the candidate satisfy **the edit text** applied to the reference?
   *Satisfied*: every change asked for is there and nothing else asked to stay was changed.
   *Partly*: some of the requested changes are there, or one is there only approximately.
   *Not satisfied*: none of them, or the candidate contradicts the edit.

**Who "the character" is** — what the answers are checked against:

- **MovieNet frames** (and the film world): the person in the **amber box** on the reference, named
  on the box (the credited cast member). Other people on the reference do not count. The
  candidate shows the same character when that person is in it, in any shot, pose, outfit or
  lighting, among any others; candidates carry no box, so look for the person yourself.
- **The generated world**: a character *is* its **body colour and hat** (24 characters: 6 body
  colours × 4 hats: top hat, crown, horns, antenna; the name is only a label for that pair). Same
  body colour *and* same hat → same character, whatever the position, facing, size, background or
  objects. Any other body colour, or any other hat → a different character.

The two questions are independent: a different character can satisfy the edit (Identity: different,
Edit: satisfied), and the unchanged reference re-shot fails it (Identity: same, Edit: not satisfied).

Examples (generated world): reference *Ada — teal body, top hat — on a beach with a red square*,
edit *"Make the square blue."*
- teal body, top hat, beach, blue square → Same character · Edit satisfied.
- teal body, top hat, beach, red square → Same character · Not satisfied (nothing changed).
- teal body, **crown**, beach, blue square → Different character (another hat) · Edit satisfied.
- **pink** body, top hat, beach, blue square → Different character (another body colour) · Edit satisfied.
- teal body, top hat, beach, purple square → Same character · Partly (approximately the asked colour).

The worked examples below are the world's own ground truth, labelled with each figure's look.

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
    from cir_core.world.spec import identity_look

    ref, q = bench.reference_idx[0], bench.queries[0]
    ids, ok = bench.identities(), bench.edit_ok_sets()[0]

    def look(row: int) -> str:
        return "{} body, {}".format(*identity_look(ids[row]))

    out = [(engine.view.image(ref, size), f"Reference ({look(ref)}) · edit: “{q.text}”")]
    for row in bench.subsets[0]:
        same = ids[row] == ids[ref]
        who = f"{'Same' if same else 'Different'} character ({look(row)})"
        if row == bench.target_idx[0]:
            label = f"{who} · Edit satisfied (the target)"
        elif row in ok:
            label = f"{who} · Edit satisfied"
        elif bench.items[row].scene.key() == bench.items[ref].scene.key():
            label = f"{who} · Not satisfied (nothing changed)"
        else:
            label = f"{who} · Partly or not: a change is missing or wrong"
        out.append((engine.view.image(row, size), label))
    return out
