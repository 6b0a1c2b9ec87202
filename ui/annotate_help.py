"""What the Annotate tab teaches and how its keys work: the guidelines, worked examples from the
world's ground truth, and the page script that maps keys to the buttons (keys shown on them)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cir_core.engine import Engine

KEYS = {"1": "ann-id-yes", "2": "ann-id-no", "3": "ann-id-cant_tell", "q": "ann-edit-yes",
        "w": "ann-edit-partial", "e": "ann-edit-no", "s": "ann-skip", "b": "ann-back", "n": "ann-next"}
# Shown after each button's words where there is a keyboard (a fine pointer that hovers), never on
# a touch screen: CSS, so the buttons' own names stay the words alone.
KEY_HINT_CSS = "@media (hover: hover) and (pointer: fine) {" + " ".join(
    f"#{el}::after {{content: '\\00a0\\00a0[{k.upper()}]'; opacity: 0.8;}}" for k, el in KEYS.items()) + "}"

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

**Skip [S]** with a reason (choose it in the list beside the button) when you cannot judge; **Back [B]** revisits your previous answer (changing it
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
  // Name each button's key for assistive technology, and say which answers are chosen: the pair's
  // HTML carries them (data-identity, data-edit); the buttons get aria-pressed.
  const mark = () => {
    for (const [k, id] of Object.entries(keys)) {
      const b = document.getElementById(id);
      const btn = b && (b.tagName === 'BUTTON' ? b : b.querySelector('button'));
      if (btn && !btn.hasAttribute('aria-keyshortcuts')) btn.setAttribute('aria-keyshortcuts', k.toUpperCase());
    }
    const reason = document.querySelector('#ann-skip-reason input');
    if (reason && !reason.placeholder) reason.placeholder = 'Skip reason…';  // the list has no visible label
    const pair = document.querySelector('#ann-pair .ann-pair');
    for (const [q, values] of [['identity', ['yes', 'no', 'cant_tell']], ['edit', ['yes', 'partial', 'no']]]) {
      const chosen = pair ? pair.dataset[q] : undefined;
      for (const v of values) {
        const b = document.getElementById(`ann-${q === 'identity' ? 'id' : 'edit'}-${v}`);
        if (b) b.setAttribute('aria-pressed', chosen === v ? 'true' : 'false');
      }
    }
  };
  new MutationObserver(mark).observe(document.documentElement, {childList: true, subtree: true});
})();
</script>
""" % ("{" + ", ".join(f'"{k}": "{v}"' for k, v in KEYS.items()) + "}")



def guideline_examples(engine: Engine, size: int = 200) -> list[tuple[Any, str]]:
    """Worked examples for the guidelines from the world's first query: the reference, then each
    candidate of its hard subset with the answers the world's ground truth gives. Empty when the
    gallery is not the generated world (there is no ground truth to show)."""
    bench = engine.world
    if bench is None or not bench.queries:
        return []
    from cir_core.world.spec import identity_look

    ref, q = bench.reference_idx[0], bench.queries[0]
    ids, ok = bench.identities(), bench.edit_ok_sets()[0]

    def look(row: int) -> str:
        return "{} body, {}".format(*identity_look(ids[row]))

    out = [(engine.image(ref, size), f"Reference ({look(ref)}) · edit: “{q.text}”")]
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
        out.append((engine.image(row, size), label))
    return out
