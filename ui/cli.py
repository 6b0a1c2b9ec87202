"""`cir-app` (console script): the app, as `python app.py` runs it, from an installed workbench."""
from __future__ import annotations

import gc


def main() -> None:
    """Settings from flags / CIR_* variables, the offline default, the annotation DB's snapshots,
    then the app on Gradio's server (`python app.py --help` lists every setting)."""
    gc.disable()  # as app.py: the start-up's millions of long-lived objects, collected once built
    from .settings import apply_offline_default, from_args

    config = from_args(known_only=False)
    apply_offline_default(config)  # before gradio / huggingface_hub read HF_HUB_OFFLINE
    from db.snapshot import start_persistence

    from . import build_demo, launch_kwargs

    start_persistence(config.db, config.db_repo)
    demo = build_demo(config)
    demo.cir_holder.warm_up()
    demo.launch(**launch_kwargs(config))


if __name__ == "__main__":
    main()
