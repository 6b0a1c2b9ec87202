"""The Hub, for people: `python -m cir_core.hub push|pull KIND ...` (`__main__.py`) and a gallery's
own push and pull (`cir_core.hub.gallery`).

    python -m cir_core.hub push methods assets/methods org/cir-methods --tag v1
    python -m cir_core.hub pull methods org/cir-methods@v1 --out ckpts
    python -m cir_core.hub push gallery frames/ org/my-frames --backbone ViT-L-14 --pretrained openai

A spec is `org/name` or `hf-hub:org/name`, optionally `@revision` (branch, tag or commit sha);
`--revision` or `CIR_<KIND>_REVISION` pins it otherwise. Pulling and pushing a verified repo is
`cir_core.storage.repo`, a layer below the backbone loader, which pins `hf-hub:org/name@rev` with
it; this package sits above the index builder, because pushing a gallery embeds it.
"""
