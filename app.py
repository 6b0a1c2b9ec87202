"""CIR Workbench: `python app.py [--gallery DIR] [--backbone ViT-L-14 --pretrained openai] ...`.

Thin on purpose (Gradio's `demo/<name>/run.py` convention): settings from flags / CIR_* env vars,
a module-level `demo`, `launch()` under `__main__`. The tabs live in `ui/`, the logic in
`cir_core/engine/`. `python app.py --help` lists every setting.
"""
import gc

# The start-up (torch, open_clip, gradio, the engine) makes millions of objects that live as long
# as the process; collecting while they are made is ~20 % of the imports' time (farm-bench, 8
# runs). The collector comes back on once the engine is built, or as soon as a gallery needs
# encoding (EngineHolder.get). Turned on right after the imports instead, it cost the first
# answer 1.1-1.9 s of sweeps (measured): the engine's build allocates much of what the start does.
gc.disable()

from ui.settings import apply_offline_default, from_args  # noqa: E402

config = from_args()
apply_offline_default(config)  # before gradio / huggingface_hub read HF_HUB_OFFLINE

from db.snapshot import start_persistence  # noqa: E402
from ui import build_demo, launch_kwargs  # noqa: E402

# Restore the annotation DB from its snapshot repo (when one is set) before anything opens it,
# then keep pushing snapshots; here, in the main thread, so SIGTERM still gets a final push.
# Without CIR_DB_REPO it returns None and logs that the DB is not persisted (a warning on a Space).
persistence = start_persistence(config.db, config.db_repo)
demo = build_demo(config)

if __name__ == "__main__":
    demo.cir_holder.warm_up()  # backbone, gallery, index: built while the server starts
    demo.launch(**launch_kwargs(config))
else:
    gc.enable()  # imported (gradio's reload mode, a test): the imports are done
