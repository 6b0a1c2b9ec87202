"""What the tabs share: the lazily built engine, result thumbnails with their marks, the look."""
from __future__ import annotations

import contextvars
import gc
import html
import logging
import math
import re
import threading
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

from PIL import Image, ImageDraw

from cir_core.errors import CIRError
from cir_core.progress import running

from .settings import AppConfig

if TYPE_CHECKING:
    from cir_core.engine import Engine

TARGET_RGB = (26, 150, 65)  # the green frame of a ground-truth target (same as cir_core.figures)
SAME_RGB = (33, 102, 172)  # the blue dot of a result showing the reference's character
THUMB = 160

LEGEND = ("<span class='legend-target'>green frame, ✓</span> ground-truth target (the world's and the "
          "films' test queries) · <span class='legend-same'>●</span> same character as the reference")


POLL_S = 0.5  # how often a waiting handler looks at the long work it waits for


class EngineHolder:
    """Builds the engine once, in a thread of its own (`start`; the app starts it while the
    server starts), and keeps it. Whoever needs it meanwhile waits in `get`, told through a
    `gr.Progress` how far the build is (the gallery embedded, a download, an index: n/N and
    an ETA, `cir_core.progress.running`). A load failure is remembered and re-raised with its
    message: fix the setting and restart."""

    def __init__(self, config: AppConfig, engine: Engine | None = None,
                 loader: Callable[..., Any] | None = None):
        self.config = config
        self.engine = engine
        self.error: CIRError | None = None
        self._loader = loader
        self._lock = threading.Lock()
        self._started = engine is not None
        self._ready = threading.Event()
        if engine is not None:
            self._ready.set()

    def start(self) -> None:
        """Begin building the engine in the background (once)."""
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._build, name="engine-build", daemon=True).start()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the engine is built (or failed) within `timeout` seconds."""
        return self._ready.wait(timeout)

    def _build(self) -> None:
        from cir_core.engine import load_engine

        def cb(done: int, total: int, desc: str | None = None) -> None:
            # Encoding a user's gallery can take hours: not under app.py's start-up pause
            # of the collector (the start's objects are frozen first, not swept).
            if total and not gc.isenabled() and desc is None:
                gc.freeze()
                gc.enable()

        try:
            self.engine = (self._loader or load_engine)(self.config, progress_cb=cb)
        except CIRError as exc:
            self.error = exc
        except Exception as exc:  # noqa: BLE001 - said on the page, with the log's traceback
            logging.getLogger(__name__).exception("the engine could not be built")
            self.error = CIRError(f"{type(exc).__name__}: {exc}".splitlines()[0])
        else:
            # The engine's millions of long-lived objects (torch, the gallery) leave the
            # GC's view: later collections scan only what requests allocate, instead of
            # pausing a click for a full sweep of the heap now and then. No collection
            # first (CPython's gc.freeze recipe): with the app's start it would sweep ~1.1M
            # objects (0.6 s of the first answer) to free ~17k (~15 MB), measured.
            gc.freeze()
        finally:
            gc.enable()  # app.py pauses the collector for the start-up
            self._ready.set()

    def get(self, progress: Any = None) -> Engine:
        """The engine, once built (starting the build if nobody has); meanwhile `progress` (a
        `gr.Progress`) is told what the build is doing."""
        if self.engine is not None:
            return self.engine
        self.start()
        if progress is not None:
            progress(0.0, desc="Loading the backbone and the gallery")
        while not self._ready.wait(POLL_S):
            report_progress(progress)
        if self.error is not None:
            raise type(self.error)(f"The workbench could not start: {self.error}")
        assert self.engine is not None
        return self.engine

    def loading_line(self) -> str:
        """What the page says while the engine is built: the long work in flight with n/N and an
        ETA, or that the backbone and the gallery are loading."""
        tasks = running()
        if not tasks:
            return "**Loading** the backbone and the gallery…"
        return "**Loading** · " + " · ".join(md_text(t.line(), 400) for t in tasks[-2:]) + \
            " (first run only: cached for later starts)" * any("embedding" in t.desc for t in tasks)

    def warm_up(self) -> threading.Thread:
        """Start building the engine now, in the background (the app's first page load then
        finds it ready or waits for it, told how far it is), then answer one request with it
        (`Engine.warm_up`); failures are kept for `get` to report."""
        def build() -> None:
            try:
                engine = self.get()
            except CIRError:
                return  # remembered in self.error; the page shows it
            try:
                engine.warm_up()
            except Exception:  # noqa: BLE001 - the visitors' requests will say what is wrong
                logging.getLogger(__name__).exception("the warm-up request failed")

        t = threading.Thread(target=build, name="engine-warm-up", daemon=True)
        t.start()
        return t


def report_progress(progress: Any) -> None:
    """Tell a `gr.Progress` about the newest long work in flight (n/N, elapsed, ETA)."""
    tasks = running()
    if progress is None or not tasks:
        return
    t = tasks[-1]
    if t.total:
        progress((min(t.done, t.total), t.total), desc=t.line(), unit=t.unit)
    else:
        progress(None, desc=t.line())


T = TypeVar("T")


def run_reporting(fn: Callable[[], T], progress: Any) -> T:
    """`fn()` in a thread of its own (this context copied, so its toasts and its request's
    account go where they would), telling `progress` meanwhile about the long work it waits
    for: a method's first load, CIReVL's caption bank, another request's build."""
    if progress is None:
        return fn()
    ctx = contextvars.copy_context()
    box: dict[str, Any] = {}

    def go() -> None:
        try:
            box["value"] = ctx.run(fn)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=go, name="cir-request", daemon=True)
    t.start()
    while True:
        t.join(POLL_S)
        if not t.is_alive():
            break
        report_progress(progress)
    if "error" in box:
        raise box["error"]
    return box["value"]


# -- user text on the page -------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>$=:@])")


def md_text(value: Any, limit: int | None = 300) -> str:
    """`value` as literal text inside Markdown: HTML escaped (no tags, no entities from the user),
    Markdown and LaTeX punctuation backslash-escaped, line breaks as spaces, cut at `limit`.
    Every user-supplied string (names, ids, edit text, file names, error messages quoting them)
    goes through this before it reaches a gr.Markdown."""
    s = "" if value is None else str(value)
    if limit is not None and len(s) > limit:
        s = s[:limit] + "…"
    s = " ".join(s.split())
    return _MD_SPECIAL.sub(r"\\\1", html.escape(s, quote=False))


def html_text(value: Any, limit: int | None = 500) -> str:
    """`value` as literal text inside HTML (toasts are HTML)."""
    s = "" if value is None else str(value)
    if limit is not None and len(s) > limit:
        s = s[:limit] + "…"
    return html.escape(s)


def warn(message: Any) -> None:
    """A warning toast whose text is shown as text."""
    import gradio as gr

    gr.Warning(html_text(message))


# -- what an event may carry --------------------------------------------------------------------
# Handlers coerce their inputs with these, so a None, a wrong type, a huge value or NaN from a
# crafted request becomes a default or a message, never an exception.

MAX_TEXT = 20_000


def text_in(value: Any, limit: int = MAX_TEXT) -> str:
    """A text input: None or a non-text value -> "", cut at `limit` characters."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return ""
    s = str(value)
    return s[:limit]


def int_in(value: Any, default: int, lo: int, hi: int) -> int:
    """A number input as an int in [lo, hi]; None, NaN, text or a bool -> `default`."""
    return int(round(float_in(value, default, lo, hi)))


def float_in(value: Any, default: float, lo: float, hi: float) -> float:
    if isinstance(value, bool):
        return default
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        return default
    if not math.isfinite(f):
        return default
    return min(max(f, lo), hi)


def bool_in(value: Any, default: bool = False) -> bool:
    return value if isinstance(value, bool) else default


def choice_in(value: Any, choices: Sequence[Any], default: Any) -> Any:
    return value if isinstance(value, (str, int)) and value in choices else default


def list_in(value: Any, limit: int = 1000) -> list:
    return list(value[:limit]) if isinstance(value, (list, tuple)) else []


def dict_in(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def event_index(evt: Any) -> int:
    """The clicked item's index of a select event (-1 when the event carries none)."""
    i = getattr(evt, "index", None)
    if isinstance(i, (list, tuple)) and i:
        i = i[0]
    return i if isinstance(i, int) and not isinstance(i, bool) else -1


def mark(img: Image.Image, target: bool | None, same: bool | None) -> Image.Image:
    """A copy of `img` with the ground-truth frame and the same-character dot drawn on it."""
    if not target and not same:
        return img
    out = img.convert("RGB").copy()
    d = ImageDraw.Draw(out)
    w, h = out.size
    if target:
        t = max(3, min(w, h) // 22)
        for i in range(t):
            d.rectangle((i, i, w - 1 - i, h - 1 - i), outline=TARGET_RGB)
    if same:
        r = max(4, min(w, h) // 14)
        cx, cy = w - r - max(6, w // 20), r + max(6, h // 20)
        d.ellipse((cx - r - 2, cy - r - 2, cx + r + 2, cy + r + 2), fill=(255, 255, 255))
        d.ellipse((cx - r, cy - r, cx + r, cy + r), fill=SAME_RGB)
    return out


def hit_caption(hit: Any, moved: str = "") -> str:
    """'#1 · 0.731 · ✓ target' / 'test/000123' / 'Ada (same)': rank, score, marks, the item id and
    the character, one line each (the result columns wrap them, never clip them). `moved` is the
    progression's cue of how the result moved since the previous step ('▲2', '▼1', 'new')."""
    top = [f"#{hit.rank}", f"{hit.score:.3f}"]
    if hit.is_target:
        top.append("✓ target")
    if moved:
        top.append(moved)
    lines = [" · ".join(top), str(getattr(hit, "item_id", "") or "")]
    if hit.character:
        lines.append(hit.character + (" (same)" if hit.same_character else ""))
    return "\n".join(line for line in lines if line)


def gallery_items(engine: Engine, hits: list, size: int = THUMB,
                  moved: Sequence[str] | None = None) -> list[tuple[Image.Image, str]]:
    cues = list(moved or []) + [""] * len(hits)
    return [(mark(engine.thumbnail(h.row, size), h.is_target, h.same_character), hit_caption(h, cue))
            for h, cue in zip(hits, cues)]


def fmt_ms(ms: float) -> str:
    return f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.1f} ms"


CSS = """
/* the page under the app (and its footer, which can run past it) in the theme's colour: in dark
   mode the body stayed white, the footer's light text on it 1.5:1 */
body {background: var(--body-background-fill);}
.gradio-container {max-width: 1880px !important; margin: 0 auto;}
/* the selected tab's text: the theme's accent (indigo-600, 6.3:1 on white) is too dark on the dark page */
.dark [role="tab"][aria-selected="true"] {color: var(--primary-300) !important;}
#app-title h1 {margin-bottom: 0; font-size: 1.55rem;}
#app-title p {margin-top: 2px; color: var(--body-text-color-subdued);}
#banner {font-size: 0.86rem; padding: 6px 12px; border-radius: 8px;
         background: var(--background-fill-secondary); border: 1px solid var(--border-color-primary);}
#banner p {margin: 2px 0;}
.status-msg p {margin: 4px 0;}
.timings {font-size: 0.85rem; color: var(--body-text-color-subdued);}
.col-head {min-height: 4.4em;}  /* a name and a timing line that may wrap: the thumbnails start level */
.col-head p {margin: 0; font-size: 0.86rem;}
.col-head strong {font-size: 1rem;}
.col-err {color: #b45309;}
.step-label {font-size: 0.85rem;}
.step-label p {margin: 0 0 2px 0;}
.legend-target {border: 2px solid rgb(26,150,65); padding: 0 4px; border-radius: 3px;}
.legend-same {color: rgb(33,102,172); font-size: 1.1em;}
.small-note p {font-size: 0.82rem; color: var(--body-text-color-subdued); margin: 2px 0;}
.ref-info p {margin: 2px 0; font-size: 0.9rem;}
#compare-btn {min-height: 44px; font-size: 1.05rem;}
.prog-row:not(:has(*)) {display: none !important;}  /* steps beyond the edit's sentences */
/* The result columns: a grid of equal, whole columns that wraps at any width (one per row on a
   phone), instead of a flex row whose last column takes a row of its own at full width. */
#result-columns {display: grid !important; gap: var(--layout-gap);
  grid-template-columns: repeat(auto-fit, minmax(min(220px, 100%), 1fr));}
#result-columns > .column {min-width: 0 !important; width: auto !important;}
/* Every result gallery (columns, progression rows, examples, the reference browser) lays its
   thumbnails out in as many ~90-110 px cells as fit: one thumbnail size everywhere, nothing wider
   than its column (Gradio's grid gives each of its N columns at least 100 px). */
.result-gallery .grid-container, .prog-gallery .grid-container, #ref-examples-gallery .grid-container {
  grid-template-columns: repeat(auto-fill, minmax(88px, 1fr)) !important;
  grid-template-rows: none !important; grid-auto-rows: auto !important;}
#ref-browser .grid-container {grid-template-columns: repeat(auto-fill, minmax(72px, 1fr)) !important;
  grid-template-rows: none !important; grid-auto-rows: auto !important;}
/* result galleries take their content's height (Gradio's default is a 450 px scroll box) */
.result-gallery .grid-wrap, .prog-gallery .grid-wrap, #ref-browser .grid-wrap {min-height: 0 !important;
  max-height: none !important; overflow-y: visible !important;}
.result-gallery, .prog-gallery, #ref-browser {height: auto !important;}
/* result captions (rank, score, marks; the id; the character) below the picture, never over it */
.result-gallery .thumbnail-item, .prog-gallery .thumbnail-item, #ref-examples-gallery .thumbnail-item {
  aspect-ratio: auto !important; height: auto !important; display: flex !important;
  flex-direction: column !important; min-width: 0;}
.result-gallery .thumbnail-item img, .prog-gallery .thumbnail-item img,
#ref-examples-gallery .thumbnail-item img {aspect-ratio: 1 / 1; width: 100%; height: auto !important;
  object-fit: contain;}
.result-gallery .caption-label, .prog-gallery .caption-label, #ref-examples-gallery .caption-label {
  position: static !important; max-width: 100% !important; white-space: pre-line !important;
  overflow-wrap: anywhere; border: none !important; border-top: 1px solid var(--border-color-primary) !important;
  border-radius: 0 !important; font-size: 11px !important; line-height: 1.3 !important;
  padding: 2px 4px !important; text-align: center !important; background: transparent !important;}
/* a progression row: its label beside the thumbnails, above them where both do not fit */
.prog-row {flex-wrap: wrap !important;}
.prog-row > .step-label {flex: 0 0 160px !important; min-width: min(160px, 100%) !important;}
.prog-row > .prog-gallery {flex: 1 1 320px !important; min-width: min(320px, 100%) !important;}
/* a clicked result, full size, over the page */
#result-preview {position: fixed !important; z-index: 1000; top: 4vh; left: 50%; transform: translateX(-50%);
  width: min(720px, 94vw) !important; max-height: 92vh; overflow-y: auto; padding: 12px;
  background: var(--background-fill-primary); border: 1px solid var(--border-color-primary);
  border-radius: 12px; box-shadow: 0 12px 48px rgba(0, 0, 0, 0.35);}
#result-preview > * {flex-shrink: 0 !important;}  /* the box scrolls; its parts never squeeze */
#result-preview-image {height: min(640px, calc(94vw - 26px), 64vh) !important;}  /* square, as the images */
#result-preview-image img {object-fit: contain;}
#edit-counter p {margin: 0; text-align: right;}
#fig-status pre {white-space: pre-wrap; overflow-wrap: anywhere;}  /* no scroll box: all of it reads */
/* Annotate: reference, candidate, both answer rows and Next on one 1440x900 screen (the pictures
   give up height first); a column on a phone, with big pictures and touch-sized buttons */
#ann-edit h3 {margin: 2px 0 4px;}
.ann-pair {display: flex; gap: 14px; justify-content: center; width: min(1216px, calc(100vw - 64px));
  max-width: 100%;}
#ann-tools button {white-space: nowrap;}
.ann-pair figure {flex: 1 1 0; margin: 0; text-align: center; max-width: 50%;}
.ann-pair img {width: 100%; max-height: clamp(180px, calc(100vh - 580px), 384px); object-fit: contain;
  border-radius: 8px; border: 1px solid var(--border-color-primary); background: var(--background-fill-secondary);}
.ann-pair figcaption {font-size: 0.85rem; color: var(--body-text-color-primary);}
@media (max-width: 640px) {
  .ann-pair {flex-direction: column; gap: 8px; width: auto;}
  .ann-pair figure {max-width: 100%;}
  .ann-pair img {max-height: min(92vw, 60vh);}
  .ann-answers button, #ann-tools button {min-height: 48px;}
}
.ann-missing {padding: 40px 8px; border: 1px dashed var(--border-color-primary); border-radius: 8px;}
/* the neighbourhood map (ui/why.py): an SVG at its column's width, its legend wrapping under it */
.why-map-head {font-size: var(--text-lg); font-weight: 600; margin: 18px 0 2px 0;}
.why-map-note {font-size: 0.85rem; margin: 0;}
.why-map {margin: 8px 0; max-width: 600px;}
.why-map-svg {width: 100%; height: auto; color: var(--body-text-color);}
.why-legend {display: flex; flex-wrap: wrap; gap: 4px 16px; list-style: none; padding: 0; margin: 6px 0;
  font-size: 0.85rem;}
.why-legend li {display: flex; align-items: center; gap: 3px; margin: 0;}
.why-map figcaption {font-size: 0.85rem; color: var(--body-text-color);}
#ref-examples-gallery .caption-label {text-align: left !important; display: -webkit-box;
  -webkit-line-clamp: 3; -webkit-box-orient: vertical; overflow: hidden;}
"""


def theme() -> Any:
    import gradio as gr

    # System fonts only: the default theme would fetch web fonts, and the app runs offline.
    soft = gr.themes.Soft(primary_hue="indigo", secondary_hue="slate", neutral_hue="slate",
                          font=["ui-sans-serif", "system-ui", "Segoe UI", "Roboto", "Helvetica Neue",
                                "Arial", "sans-serif"],
                          font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"])
    # Text at >= 4.5:1 contrast (WCAG AA) in light and dark (axe-core, tests/test_app_a11y.py):
    # Soft's grey notes (slate-400 on slate-50: 2.45:1), indigo labels on their pale badge (3.6:1)
    # and white on indigo-500 (4.46:1) are a shade darker here.
    return soft.set(body_text_color_subdued="*neutral_600", body_text_color_subdued_dark="*neutral_300",
                    block_label_text_color="*primary_700", block_title_text_color="*primary_700",
                    button_primary_background_fill="*primary_600", button_primary_background_fill_hover="*primary_700",
                    button_primary_background_fill_dark="*primary_600",
                    button_primary_background_fill_hover_dark="*primary_700",
                    checkbox_label_background_fill_selected="*primary_600",
                    checkbox_label_background_fill_selected_dark="*primary_600",
                    color_accent="*primary_600",  # the selected tab's text (one value for both modes)
                    link_text_color="*primary_700", link_text_color_hover="*primary_800",
                    link_text_color_visited="*primary_800", link_text_color_dark="*primary_300",
                    link_text_color_hover_dark="*primary_200", link_text_color_visited_dark="*primary_200")
