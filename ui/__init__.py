"""The Gradio app, one module per tab (`compare.py`, `figures.py`); `build_demo` composes them.

    demo = build_demo(AppConfig(world_queries=30))   # or build_demo(engine=my_engine)
    demo.launch(**launch_kwargs(cfg))

The engine (backbone, gallery embeddings, index, methods) is built on the first page load, with a
progress bar while a new gallery is embedded; a later start reads the embeddings from the cache.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .common import CSS, EngineHolder, md_text, theme, warn
from .settings import AppConfig
from cir_core import env

if TYPE_CHECKING:
    from cir_core.engine import Engine

__all__ = ["build_demo", "launch_kwargs", "EngineHolder"]

MAX_UPLOAD = "25mb"


def banner(engine: Engine, annotation_only: bool = False) -> str:
    """One line on what the app runs: backbone, gallery, which methods load. An annotation-only
    instance names no method: its annotators must not know which methods the pool compares."""
    if annotation_only:
        return f"**Gallery** {md_text(engine.view.gallery.name)} ({len(engine.view.gallery):,} images)"
    status = engine.methods.status()
    marks = " · ".join(f"{'✓' if err is None else '⚠'} {_label(n)}" for n, err in status.items())
    n = len(engine.view.gallery)
    kind = "generated world, test split" if engine.view.bench is not None else "images"
    lines = [f"**Backbone** `{engine.backbone.id}` · **Gallery** {engine.view.gallery.name} ({n:,} {kind}; "
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


def build_demo(config: AppConfig | None = None, engine: Engine | None = None) -> Any:
    """The Blocks app. `engine` skips loading (tests inject a small one); otherwise the engine
    is built from `config` on the first page load. With `config.annotation_only` the app has
    the Annotate tab and the viewer's own Results only."""
    import gradio as gr

    from . import annotate, annotation_results, compare, figures, review
    from db.users import load_roles

    cfg = config or AppConfig()
    use_own_gradio_dir()
    # Gradio's queue recomputes its monitoring summary (a pandas group-by over the last 10,000
    # events) after every event by default: a cost that grows with the session. Every 1,000
    # events is plenty for the dashboard; read when gr.Blocks creates its queue.
    os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "1000")
    holder = EngineHolder(cfg, engine)
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
            from cir_core.errors import CIRError

            n_out = 1 + (0 if only else len(ctab.load_outputs) + len(fig_outputs))
            try:
                eng = holder.get(progress)
            except CIRError as exc:
                warn(str(exc))
                msg = f"⚠ {md_text(exc)}"
                return msg if only else [msg] + [gr.skip()] * (n_out - 1)
            if only:
                return banner(eng, annotation_only=True)  # one output: the value itself
            params = dict(getattr(request, "query_params", None) or {})  # none outside a page load
            return [banner(eng), *ctab.load(eng, params), *fig_load(eng)]

        # Gradio passes the request (the permalink's query parameters) by the annotation; with
        # postponed annotations and gradio imported in this function it must be the class itself.
        on_load.__annotations__["request"] = gr.Request
        load_outputs = [top] if only else [top, *ctab.load_outputs, *fig_outputs]
        # The page-load events run in the Annotate tab's concurrency group: 32 annotators opening
        # the page at once must not wait for each other one by one.
        group = {"api_visibility": "private", "concurrency_limit": annotate.ANNOTATE_CONCURRENCY,
                 "concurrency_id": "annotate"}
        loaded = demo.load(on_load, None, load_outputs, **group)
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
    from .annotate_help import HOTKEY_JS
    from .preview import PREVIEW_KEYS_JS
    from .settings import parse_proxies
    from .signin import trust_proxies
    from .tempfiles import exit_cleanly_on_sigterm

    cfg = cfg or AppConfig()
    exit_cleanly_on_sigterm()
    from .compare import compare_concurrency

    trust_proxies(parse_proxies(cfg.trusted_proxies))
    kw = {"server_name": cfg.host, "server_port": cfg.port, "theme": theme(), "css": CSS,
          "max_file_size": MAX_UPLOAD, "footer_links": ["api", "settings"],
          "head": HOTKEY_JS + PREVIEW_KEYS_JS,
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
    app_kwargs["middleware"] = [*app_kwargs.get("middleware", []), Middleware(
        HttpGuard, annotation_only=bool(cfg.annotation_only), allowed_origins=parse_origins(cfg.allowed_origins))]
    return kw
