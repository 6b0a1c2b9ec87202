"""`python -m cir_core.hub push|pull KIND ...`: the command line of `cir_core.hub` (see its docstring)."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Sequence

from ..errors import CIRError
from ..storage import FolderStore, StorageError, Store
from ..storage.manifest import KINDS, MANIFEST
from ..storage.repo import REVISION_ENV, pull, push
from . import __doc__ as _DOC


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m cir_core.hub", description=_DOC.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="kinds: methods (a folder of <method>/config.json + model.safetensors), "
                                 "backbone (a local-dir: folder), embeddings (an EmbeddingCache root), "
                                 "gallery (a folder of frames or a manifest: frames, thumbnails and an index "
                                 "per --backbone; the app opens it with --gallery hf:org/name@rev). "
                                 "Revision env vars: " + ", ".join(REVISION_ENV.values()) + ". "
                                 "CIR_LOCAL_HUB=DIR uses a folder instead of the Hub.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("push", help="upload a folder with its manifest as one commit")
    p.add_argument("kind", choices=KINDS)
    p.add_argument("folder")
    p.add_argument("spec", help="org/name[@branch]")
    p.add_argument("--revision", help="branch to commit to (default main)")
    p.add_argument("--tag", help="tag the new commit (e.g. v1) so pulls can pin it")
    p.add_argument("--message", help="commit message")
    q = sub.add_parser("pull", help="download a revision, verify it, optionally copy it out")
    q.add_argument("kind", choices=KINDS)
    q.add_argument("spec", help="org/name[@branch|tag|sha]")
    q.add_argument("--revision", help="branch, tag or commit sha (or CIR_<KIND>_REVISION)")
    q.add_argument("--out", help="copy the verified files here (default: print the cache folder)")
    for x in (p, q):
        x.add_argument("--include", action="append", help="only files matching this glob (repeatable)")
        x.add_argument("--local-hub", help="a folder standing in for the Hub (same as CIR_LOCAL_HUB)")
    g = p.add_argument_group("push gallery (FOLDER: a folder of frames, or a JSONL/CSV manifest with a "
                             "'path' column and the gallery's own columns)")
    g.add_argument("--backbone", action="append", default=[], help="embed with this open_clip backbone "
                   "(repeatable; as the app's --backbone); resumable, in --work")
    g.add_argument("--pretrained", action="append", default=[], help="its pretrained tag or weights file "
                   "(none, or one per --backbone, in order)")
    g.add_argument("--index", action="append", default=[], help="an index folder already built from the "
                   "same source by `python -m cir_core.index build` (repeatable)")
    g.add_argument("--work", help="where the embeddings and the staged repo are kept (default: SRC.hub)")
    g.add_argument("--thumb-size", type=int, default=160, help="thumbnail side in pixels (default 160)")
    g.add_argument("--batch-size", type=int, default=64, help="images per forward pass")
    g.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    return ap


def _push_gallery(args: argparse.Namespace, backend: Store | None):
    from .gallery.push import push_gallery

    pre = list(args.pretrained)
    if pre and len(pre) != len(args.backbone):
        raise StorageError(f"give --pretrained once per --backbone ({len(args.backbone)}), or not at all; "
                           f"got {len(pre)}")
    backbones = list(zip(args.backbone, pre or [None] * len(args.backbone)))
    return push_gallery(args.folder, args.spec, backbones=backbones, indexes=args.index, work=args.work,
                        thumb_size=args.thumb_size, tag=args.tag, message=args.message, backend=backend,
                        batch_size=args.batch_size, device=args.device)


def _gallery_layout():
    from .gallery.layout import check_gallery_layout

    return check_gallery_layout


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    backend = FolderStore(args.local_hub, Path(args.local_hub) / ".cache") if args.local_hub else None
    try:
        if args.cmd == "push":
            done = _push_gallery(args, backend) if args.kind == "gallery" else \
                push(args.kind, args.folder, args.spec, revision=args.revision, tag=args.tag,
                     include=args.include, message=args.message, backend=backend, progress=True)
            print(f"pushed {len(done.files)} files + {MANIFEST} to {done.ref}: commit {done.commit}"
                  + (f", tagged {done.tag}" if done.tag else ""), file=sys.stderr)
            print(done.commit)
        else:
            got = pull(args.kind, args.spec, args.out, revision=args.revision, patterns=args.include,
                       backend=backend, layout=_gallery_layout() if args.kind == "gallery" else None)
            print(f"verified {len(got.files)} files of {got.ref} (commit {got.commit})", file=sys.stderr)
            print(got.folder)
    except CIRError as exc:  # StorageError, and a gallery's GalleryError / BackboneError
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
