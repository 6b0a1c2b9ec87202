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

HOTKEY_JS = """
<script>
(() => {
  const keys = %s;
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
})();
</script>
""" % json.dumps(KEYS)



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
