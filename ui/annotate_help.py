"""What the Annotate tab teaches and how its keys work: the guidelines, worked examples from the
world's ground truth, and the page script that maps keys to the buttons (keys shown on them)."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from db.guidelines import GUIDELINES  # noqa: F401 (the tab's guidelines, written once in db)
from db.questions import QUESTIONS

if TYPE_CHECKING:
    from cir_core.engine import Engine

# key -> the buttons it presses, the first visible one (a key answers one question per mode, and a
# set's screen shows one mode's questions): every question's choices (db/questions.py), the tab's
# own keys, and the Review tab's buttons (`rev-...`), which show in place of the Annotate tab's.
KEYS: dict[str, list[str]] = {}
for _q in QUESTIONS.values():
    for _c in _q.choices:
        KEYS.setdefault(_c.key.lower(), []).extend([f"ann-{_q.element}-{_c.value}", f"rev-{_q.element}-{_c.value}"])
for _k, _id in (("s", "ann-skip"), ("b", "ann-back"), ("n", "ann-next")):
    KEYS.setdefault(_k, []).append(_id)
KEYS["n"].append("rev-next")
# Shown after each button's words where there is a keyboard (a fine pointer that hovers), never on
# a touch screen: CSS, so the buttons' own names stay the words alone.
KEY_HINT_CSS = "@media (hover: hover) and (pointer: fine) {" + " ".join(
    f"#{el}::after {{content: '\\00a0\\00a0[{k.upper()}]'; opacity: 0.8;}}" for k, els in KEYS.items()
    for el in els) + "}"
# What the page script needs to mark the chosen answers aria-pressed: each question's element part
# and values (the pair's HTML carries the chosen ones as data-<question>, ui/annotate_images.py).
ARIA_QUESTIONS = [[q.name, q.element, list(q.values)] for q in QUESTIONS.values()]

HOTKEY_JS = """
<script>
(() => {
  const keys = %s;
  const questions = %s;
  document.addEventListener('keydown', (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.repeat) return;
    const t = e.target;
    if (t && (t.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(t.tagName))) return;
    const ids = keys[e.key.toLowerCase()];
    if (!ids) return;
    for (const id of ids) {
      let el = document.getElementById(id);
      if (el && el.tagName !== 'BUTTON') el = el.querySelector('button') || el;
      if (!el || !el.checkVisibility() || el.disabled) continue;  // only the tab and questions on screen
      e.preventDefault();
      el.click();
      return;
    }
  });
  // Name each button's key for assistive technology, and say which answers are chosen: the pair's
  // HTML carries them (data-<question>); the buttons get aria-pressed, in the Annotate and Review tabs.
  const mark = () => {
    for (const [k, ids] of Object.entries(keys)) {
      for (const id of ids) {
        const b = document.getElementById(id);
        const btn = b && (b.tagName === 'BUTTON' ? b : b.querySelector('button'));
        if (btn && !btn.hasAttribute('aria-keyshortcuts')) btn.setAttribute('aria-keyshortcuts', k.toUpperCase());
      }
    }
    const reason = document.querySelector('#ann-skip-reason input');
    if (reason && !reason.placeholder) reason.placeholder = 'Skip reason…';  // the list has no visible label
    for (const tab of ['ann', 'rev']) {
      const pair = document.querySelector(`#${tab}-pair .ann-pair`);
      for (const [q, elem, values] of questions) {
        const chosen = pair ? pair.dataset[q] : undefined;
        for (const v of values) {
          const b = document.getElementById(`${tab}-${elem}-${v}`);
          if (b) b.setAttribute('aria-pressed', chosen === v ? 'true' : 'false');
        }
      }
    }
  };
  new MutationObserver(mark).observe(document.documentElement, {childList: true, subtree: true});
})();
</script>
""" % (json.dumps(KEYS), json.dumps(ARIA_QUESTIONS))



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
