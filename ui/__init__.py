"""The Gradio app, one module per tab (`compare.py`, `figures.py`); `build_demo` composes them.

    demo = build_demo(AppConfig(world_queries=30))   # or build_demo(engine=my_engine)
    demo.launch(**launch_kwargs(cfg))

The engine (backbone, gallery embeddings, index, methods) is built in the background from the
start (or the first page load); meanwhile the page's banner and a progress bar say what is being
done, with n/N and an ETA (a new gallery embedded, a download, an index). A later start reads
the embeddings from the cache.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

from cir_core import env

from .common import CSS, POLL_S, EngineHolder, md_text, report_progress, theme, warn
from .settings import AppConfig

if TYPE_CHECKING:
    from cir_core.engine import Engine

__all__ = ["build_demo", "launch_kwargs", "EngineHolder"]

MAX_UPLOAD = "25mb"


def banner(engine: Engine, annotation_only: bool = False) -> str:
    """One line on what the app runs: backbone, gallery, which methods load. An annotation-only
    instance names no method: its annotators must not know which methods the pool compares."""
    if annotation_only:
        return f"**Gallery** {md_text(engine.gallery.name)} ({len(engine.gallery):,} images)"
    status = engine.methods.status()
    marks = " · ".join(f"{'✓' if err is None else '⚠'} {_label(n)}" for n, err in status.items())
    n = len(engine.gallery)
    split = getattr(engine.benchmark, "split", "")
    kind = {"world": f"generated world, {split} split", "films": f"film world keyframes, {split} split"}.get(
        engine.domain, "images")
    lines = [f"**Backbone** `{engine.backbone.id}` · **Gallery** {engine.gallery.name} ({n:,} {kind}; "
             f"{engine.searcher.kind} search) · **Methods** {marks}"]
    lines += [f"⚠ {note}" for note in engine.notes]
    return "\n\n".join(lines)


def _label(name: str) -> str:
    from cir_core.methods import method_label

    return method_label(name)


# Gradio's own copies of the files the app serves (figure exports, judgment exports, pictures,
# uploads): every 10 minutes, those older than an hour are deleted, and all of them at shutdown.
DELETE_CACHE = (600, 3600)


def use_own_gradio_dir() -> None:
    """Gradio's uploads and cache in this process's own temporary root (`ui.tempfiles`), removed
    at exit and swept after a kill, unless the operator named a folder (`GRADIO_TEMP_DIR`).
    Before the first component is made: each reads the folder when it is created."""
    from .tempfiles import TEMP

    global _OWN_GRADIO_DIR
    current = env.read("GRADIO_TEMP_DIR")
    if not current or current == _OWN_GRADIO_DIR:
        _OWN_GRADIO_DIR = os.environ["GRADIO_TEMP_DIR"] = str(TEMP.gradio_dir())


_OWN_GRADIO_DIR: str | None = None


def build_demo(config: AppConfig | None = None, engine: Engine | None = None,
               loader: Callable[..., Engine] | None = None) -> Any:
    """The Blocks app. `engine` skips loading (tests inject a small one); otherwise the engine
    is built from `config` (by `loader(config, progress_cb=...)`, default
    `cir_core.engine.load_engine`) when the app starts or the first page loads. With
    `config.annotation_only` the app has the Annotate tab and the viewer's own Results only."""
    import gradio as gr

    from db.users import load_roles

    from . import annotate, annotation_results, compare, figures, review

    cfg = config or AppConfig()
    use_own_gradio_dir()
    # Gradio's queue recomputes its monitoring summary (a pandas group-by over the last 10,000
    # events) after every event by default: a cost that grows with the session. Every 1,000
    # events is plenty for the dashboard; read when gr.Blocks creates its queue.
    os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "1000")
    holder = EngineHolder(cfg, engine, loader)
    # Reviewers and organisers: the annotators file's `@reviewer` / `@organiser` lines (db/users.py).
    services = annotate.ServiceHolder(cfg.db, roles=load_roles(cfg.annotators))
    from cir_core.paths import cache_dir

    annotate.IMAGES.configure(cfg.cache_dir or cache_dir())
    only = bool(cfg.annotation_only)
    with gr.Blocks(title="CIR Workbench", analytics_enabled=False, delete_cache=DELETE_CACHE) as demo:
        gr.Markdown("# CIR Workbench\nComposed image retrieval: one reference, one edit, every method "
                    "side by side." if not only else "# CIR Workbench · annotation\nJudge pairs blind: "
                    "which method retrieved a candidate is never shown.", elem_id="app-title")
        top = gr.Markdown("Loading the backbone and the gallery…", elem_id="banner")
        with gr.Tabs():
            if not only:
                with gr.Tab("Compare", id="compare"):
                    ctab = compare.build(holder, cfg)
                with gr.Tab("Figures", id="figures"):
                    fig_outputs, fig_load = figures.build(holder, cfg, ctab)
            with gr.Tab("Annotate", id="annotate"):
                atab = annotate.build(holder, services)
            with gr.Tab("Review", id="review", visible=False) as vtab:  # shown to reviewers on load
                revtab = review.build(holder, services, vtab)
            with gr.Tab("Results", id="results") as rtab:
                res_outputs, res_load = annotation_results.build(services, holder, own_only=only)

        def on_load(request, progress=gr.Progress()):
            """While the engine is built (the gallery embedded, a download, an index) the banner
            says how far with n/N and an ETA, and so does the progress bar; then the tabs fill."""
            from cir_core.errors import CIRError

            n_out = 1 + (0 if only else len(ctab.load_outputs) + len(fig_outputs))
            banner_only = (lambda line: line) if only else (lambda line: [line] + [gr.skip()] * (n_out - 1))
            holder.start()
            shown = None
            while not holder.wait(POLL_S):
                line = holder.loading_line()
                report_progress(progress)
                if line != shown:
                    shown = line
                    yield banner_only(line)
            try:
                eng = holder.get(progress)
            except CIRError as exc:
                warn(str(exc))
                yield banner_only(f"⚠ {md_text(exc)}")
                return
            if only:
                yield banner(eng, annotation_only=True)  # one output: the value itself
                return
            params = dict(getattr(request, "query_params", None) or {})  # none outside a page load
            yield [banner(eng), *ctab.load(eng, params), *fig_load(eng)]

        # Gradio passes the request (the permalink's query parameters) by the annotation; with
        # postponed annotations and gradio imported in this function it must be the class itself.
        on_load.__annotations__["request"] = gr.Request
        load_outputs = [top] if only else [top, *ctab.load_outputs, *fig_outputs]
        # The page-load events run in the Annotate tab's concurrency group: 32 annotators opening
        # the page at once must not wait for each other one by one.
        group = {"api_visibility": "private", "concurrency_limit": annotate.ANNOTATE_CONCURRENCY,
                 "concurrency_id": "annotate"}
        # the bar over one large component (the first page of the gallery, which it fills); the
        # banner above says the same in words
        loaded = demo.load(on_load, None, load_outputs, show_progress_on=[top] if only else [ctab.browser],
                           **group)
        if not only:
            ctab.after_load(loaded)  # a permalink's request, once its inputs are filled
        demo.load(atab.load, None, atab.load_outputs, **group)
        demo.load(revtab.load, None, revtab.load_outputs, **group)
        demo.load(res_load, None, res_outputs, **group)
        rtab.select(res_load, None, res_outputs, **group)  # a set pooled since the page loaded
    demo.cir_holder = holder  # type: ignore[attr-defined]  (tests and scripts reach the engine)
    demo.cir_services = services  # type: ignore[attr-defined]
    return demo


def launch_kwargs(cfg: AppConfig | None = None) -> dict:
    """What `demo.launch` needs besides the Blocks: host/port (None: Gradio's own defaults and env
    vars), the theme and CSS (Gradio 6 takes them at launch), the upload size limit, and with an
    annotators file the sign-in check (throttled per name and per client address, see
    ui/signin.py) with the middleware that tells it the client's address. Also makes SIGTERM a
    clean exit, so the temporary folders are removed when the process is stopped, and sets whose
    X-Forwarded-For is believed (`--trusted-proxies`; nobody's by default)."""
    from .a11y import A11Y_JS
    from .annotate_help import HOTKEY_JS, KEY_HINT_CSS
    from .preview import PREVIEW_KEYS_JS
    from .settings import parse_proxies
    from .signin import trust_proxies
    from .tempfiles import exit_cleanly_on_sigterm

    cfg = cfg or AppConfig()
    exit_cleanly_on_sigterm()
    from .compare import compare_concurrency

    trust_proxies(parse_proxies(cfg.trusted_proxies))
    kw = {"server_name": cfg.host, "server_port": cfg.port, "theme": theme(), "css": CSS + KEY_HINT_CSS,
          "max_file_size": MAX_UPLOAD, "footer_links": ["api", "settings"],
          "head": HOTKEY_JS + PREVIEW_KEYS_JS + A11Y_JS,
          # Gradio's 40 worker threads by default: the Compare events it lets through at once
          # (with batching they mostly wait on the engine's queue) must not starve the other tabs
          "max_threads": max(40, compare_concurrency(cfg) + 16)}
    if cfg.annotators:
        from .signin import signin_kwargs

        # Gradio's login page guards the whole app; the Annotate tab reads request.username.
        kw.update(signin_kwargs(cfg.annotators))
        kw["auth_message"] = "CIR Workbench: sign in with your annotator name and password."
    from starlette.middleware import Middleware

    from .http_guard import HttpGuard
    from .settings import parse_origins

    # Cross-site posts, other users' sessions and exports, unbounded uploads (ui/http_guard.py):
    # inside the client-address middleware, so its logs name the client.
    app_kwargs = kw.setdefault("app_kwargs", {})
    # On a Space, its public host may differ from the Host header the proxy hands on: allow it.
    space = env.read("SPACE_HOST")
    origins = parse_origins(cfg.allowed_origins) + ((f"https://{space}",) if space else ())
    app_kwargs["middleware"] = [*app_kwargs.get("middleware", []), Middleware(
        HttpGuard, annotation_only=bool(cfg.annotation_only), allowed_origins=origins)]
    return kw
