"""axe-core (Deque's accessibility engine, vendored under tests/vendor/axe-core) in a Playwright
page: `axe_violations(page)` runs it and returns the violations of the impacts asked for, each
with its rule, its help text and the elements it found (`describe` prints them for an assertion
message). Works offline: the script is injected from the file, nothing is fetched.

    from _axe import axe_violations, describe
    bad = axe_violations(page)                      # serious and critical, the whole page
    assert bad == [], describe(bad)
    axe_violations(page, context="#result-preview", impact=("minor", "moderate", "serious", "critical"))
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

AXE_JS = Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
SERIOUS = ("serious", "critical")

RUN_JS = """async ([context, options]) => {
  const r = await axe.run(context || document, options || {});
  return r.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
    nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 240),
                              summary: (n.failureSummary || '').slice(0, 400)}))}));
}"""


def axe_violations(page: Any, impact: Sequence[str] = SERIOUS, context: str | dict | None = None,
                   options: dict | None = None) -> list[dict]:
    """The axe-core violations on `page` (a Playwright page) whose impact is in `impact`.
    `context`: a CSS selector or an axe context object (default: the whole document);
    `options`: axe.run's options (e.g. {"runOnly": ["color-contrast"]})."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE_JS))
    found = page.evaluate(RUN_JS, [context, options or {}])
    return [v for v in found if v["impact"] in impact]


def describe(violations: list[dict], nodes: int = 4) -> str:
    """The violations as readable lines: rule, impact, help, then the first `nodes` elements."""
    lines = []
    for v in violations:
        lines.append(f"{v['id']} ({v['impact']}): {v['help']} [{len(v['nodes'])} element(s)]")
        for n in v["nodes"][:nodes]:
            lines.append(f"    {n['target']}: {n['summary'].splitlines()[-1] if n['summary'] else ''}")
            lines.append(f"        {n['html']}")
    return "\n".join(lines)
