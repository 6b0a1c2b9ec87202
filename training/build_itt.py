"""Build ITT triplets (source image, edit, target caption, negative captions) from an
image–caption manifest, for PACT-style training. Five edit types (DiCE-CIR's): attribute,
spatial, scene, two, short. Three generators:

    # rules, no model (deterministic given --seed)
    python -m training.build_itt --manifest captions.jsonl --out itt.jsonl
    # any OpenAI-compatible chat-completions server; key read from $OPENAI_API_KEY
    python -m training.build_itt --manifest captions.csv --out itt.jsonl \\
        --endpoint http://localhost:8000/v1 --model Qwen2.5-7B-Instruct --workers 8
    # a local transformers model (pip install transformers first)
    python -m training.build_itt --manifest captions.jsonl --out itt.jsonl --hf-model /models/qwen
    # check a file
    python -m training.build_itt --validate itt.jsonl

Rerunning with the same --out resumes: ids already written are skipped, a partial last line
from a crash is dropped. The manifest is JSONL or CSV with `caption` and `path` and/or `id`.
See docs/ITT.md.
"""
from __future__ import annotations

import argparse
import json
import sys

from cir_core import env
from cir_core.errors import CIRError, InputError
from cir_core.settings import add_seed_arg

from .itt import (
    EDIT_TYPES,
    EndpointGenerator,
    HFGenerator,
    TemplateGenerator,
    build,
    load_prompts,
    read_manifest,
    validate_file,
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m training.build_itt", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", help="JSONL or CSV: caption + path and/or id per row")
    ap.add_argument("--out", help="output JSONL (appended to; rerun to resume)")
    ap.add_argument("--validate", metavar="FILE", help="only check FILE's records; exit 1 on any error")
    ap.add_argument("--types", default=",".join(EDIT_TYPES), help="comma-separated edit types (default: all five)")
    ap.add_argument("--per-caption", type=int, help="edit types per caption, drawn at random (default: all --types)")
    add_seed_arg(ap, what="the rules' draws and --per-caption's choice")
    ap.add_argument("--limit", type=int, help="attempt at most N jobs not yet in --out")
    ap.add_argument("--no-check-images", action="store_true", help="do not require each manifest path to exist")
    ap.add_argument("--negatives", type=int, default=2, help="failed-modification captions to ask a model for")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    m = ap.add_argument_group("model generators")
    m.add_argument("--endpoint", help="OpenAI-compatible base URL (…/v1) or …/chat/completions")
    m.add_argument("--model", help="model name sent to --endpoint")
    m.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    m.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    m.add_argument("--retries", type=int, default=3, help="retries per request (5xx, 429, timeouts, bad JSON)")
    m.add_argument("--backoff", type=float, default=1.0, help="first retry delay, doubled each time")
    m.add_argument("--no-json-mode", action="store_true", help="do not send response_format=json_object")
    m.add_argument("--temperature", type=float, default=0.7)
    m.add_argument("--max-tokens", type=int, default=512)
    m.add_argument("--workers", type=int, default=4, help="concurrent endpoint requests")
    m.add_argument("--hf-model", help="local transformers model folder (needs transformers installed)")
    m.add_argument("--device", default="cpu", help="device for --hf-model")
    m.add_argument("--prompts", help="prompt template JSON (default training/configs/itt_prompts.json)")
    m.add_argument("--max-consecutive-failures", type=int, default=20, help="stop after this many failed jobs in a row")
    return ap.parse_args(argv)


def make_generator(args: argparse.Namespace):
    """The generator the flags ask for; InputError on contradictory or incomplete flags."""
    if args.endpoint and args.hf_model:
        raise InputError("give --endpoint or --hf-model, not both")
    for flag in ("negatives", "retries", "max_tokens", "workers"):
        if getattr(args, flag) < (0 if flag == "retries" else 1):
            raise InputError(f"--{flag.replace('_', '-')} is too small: {getattr(args, flag)}")
    if args.endpoint:
        if not args.model:
            raise InputError("--endpoint needs --model NAME")
        return EndpointGenerator(args.endpoint, args.model, load_prompts(args.prompts),
                                 api_key=env.secret(args.api_key_env), timeout=args.timeout,
                                 retries=args.retries, backoff=args.backoff, json_mode=not args.no_json_mode,
                                 temperature=args.temperature, max_tokens=args.max_tokens,
                                 n_negatives=args.negatives)
    if args.model:
        raise InputError("--model is for --endpoint; use --hf-model PATH for a local model")
    if args.hf_model:
        return HFGenerator(args.hf_model, load_prompts(args.prompts), device=args.device,
                           temperature=args.temperature, max_new_tokens=args.max_tokens,
                           n_negatives=args.negatives, retries=args.retries)
    return TemplateGenerator(args.seed)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.validate:
            ok, errors = validate_file(args.validate)
            for e in errors:
                print(f"{args.validate}: {e}", file=sys.stderr)
            print(json.dumps({"file": args.validate, "valid_records": ok, "errors": len(errors)}))
            return 1 if errors else 0
        if not args.manifest or not args.out:
            raise InputError("--manifest and --out are required (or --validate FILE)")
        types = tuple(t.strip() for t in args.types.split(",") if t.strip())
        if args.limit is not None and args.limit < 0:
            raise InputError(f"--limit must be >= 0, got {args.limit}")
        sources = read_manifest(args.manifest, check_images=not args.no_check_images)
        gen = make_generator(args)
        model_mode = gen.info["mode"] != "template"
        stats = build(gen, sources, args.out, types=types, per_caption=args.per_caption, seed=args.seed,
                      limit=args.limit, workers=args.workers if gen.info["mode"] == "endpoint" else 1,
                      max_consecutive_failures=args.max_consecutive_failures if model_mode else None,
                      progress=not args.quiet)
    except CIRError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"out": args.out, "generator": gen.info, **stats}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
