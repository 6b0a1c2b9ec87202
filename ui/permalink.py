"""A Compare result's permalink: the reference, the edit and the settings in the page's URL, so a
result can be shared or reopened (`?ref=test/000140&edit=Make+it+blue.&k=8&scoring=chord`).

`link_query` writes the query string after a request; `from_query` reads one on page load (every
value checked as a request's would be: a bad one is left out and named in a note). An uploaded
reference has no link: its pixels are not in the URL.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence
from urllib.parse import quote, urlencode

from cir_core.engine import MAX_K
from cir_core.engine.request import noted_number

MAX_PARAM = 100_000  # characters of one value read from a URL (the edit is cut later, with a note)

# After a request: the query string becomes the page's URL (history.replaceState, no reload) and
# the full link the permalink box's value. A JS-only step, so it reads the address the browser
# shows (behind a Space's proxy the server cannot know it).
LINK_JS = """(q) => {
  if (!q || q.charAt(0) !== '?') { return q || ''; }
  const url = window.location.origin + window.location.pathname + q;
  try { window.history.replaceState(null, '', url); } catch (e) {}
  return url;
}"""


# Results marked stale (their reference changed): the address bar no longer holds their link.
UNLINK_JS = """(status) => {
  if ((status || '').includes('Stale:') && window.location.search) {
    try { window.history.replaceState(null, '', window.location.pathname); } catch (e) {}
  }
}"""


def link_query(ref_id: str, edit: str, k: int, scoring: str, lam: float | None,
               extra: Sequence[str]) -> str:
    """'?ref=…&edit=…&k=…&scoring=…[&lambda=…][&methods=a,b]' (lambda only when one λ is set for
    every method; methods: the extra columns shown)."""
    q: dict[str, str] = {"ref": ref_id, "edit": edit, "k": str(int(k)),
                         "scoring": "chord" if scoring.lower().startswith("chord") else "cosine"}
    if lam is not None:
        q["lambda"] = f"{float(lam):g}"
    if extra:
        q["methods"] = ",".join(extra)
    return "?" + urlencode(q, quote_via=quote, safe="/,")


@dataclass
class Linked:
    """The Compare inputs a permalink sets (None: the link does not set it)."""

    ref: str | None = None
    edit: str | None = None
    k: int | None = None
    scoring: str | None = None  # the radio's value: "Cosine" | "Chord"
    lam: float | None = None  # None: each method's own λ
    extra: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what of the link was not used, and why

    @property
    def runs(self) -> bool:
        """Whether the link names a result to compute (a reference and an edit)."""
        return bool(self.ref and self.edit and self.edit.strip())


def from_query(params: Mapping[str, str] | None, optional: Sequence[str]) -> Linked:
    """The inputs a page URL's query parameters set; unknown parameters are ignored (Gradio has
    its own, e.g. `view=api`, `__theme`)."""
    p = {k: str(v)[:MAX_PARAM] for k, v in dict(params or {}).items() if isinstance(k, str)}
    out = Linked(ref=p.get("ref", "").strip()[:500] or None, edit=p.get("edit") or None)
    if "k" in p:
        k, note = noted_number(p["k"], 8, 1, MAX_K, "k (in the link)", integer=True)
        out.k = int(k)
        out.notes += [note] if note else []
    if "scoring" in p:
        s = p["scoring"].strip().lower()
        if s in ("cosine", "chord"):
            out.scoring = s.capitalize()
        else:
            out.notes.append(f"scoring = {p['scoring'][:40]} in the link is neither cosine nor chord: cosine was used.")
    if "lambda" in p:
        lam, note = noted_number(p["lambda"], 0.34, 0.0, 1.0, "λ (in the link)")
        out.lam = float(lam)
        out.notes += [note] if note else []
    names = [m.strip() for m in p.get("methods", "").split(",") if m.strip()]
    out.extra = [m for m in names if m in optional]
    unknown = [m for m in names if m not in optional]
    if unknown:
        out.notes.append(f"The link names methods this app has no extra column for: {', '.join(unknown)[:200]}.")
    return out
