"""`python -m db.snapshot {snapshot,push,restore,list}`: the operator's handle on DB snapshots."""
from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from cir_core import env
from cir_core.errors import CIRError

from .core import load_snapshot, snapshot
from .persist import DEFAULT_KEEP, LATEST, SNAP_DIR, push, read_latest, restore
from .remote import remote_from_spec
from .scheduler import env_number


def build_parser() -> argparse.ArgumentParser:
    """The CLI's parser (one subcommand per operation)."""
    ap = argparse.ArgumentParser(
        prog="python -m db.snapshot",
        description="Consistent snapshots of the annotation SQLite DB, pushed to / restored from "
                    "a Hugging Face dataset repo ($CIR_DB_REPO, token $HF_TOKEN) or a folder "
                    "(file:///abs/path).")
    sub = ap.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("snapshot", help="write <UTC ts>.sqlite + .json sidecar for a live DB")
    s.add_argument("db", type=Path, help="the live SQLite file")
    s.add_argument("--out", type=Path, required=True, help="folder for the snapshot")

    def repo_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--repo", default=env.read("CIR_DB_REPO"),
                       help="owner/name dataset repo or file:///folder (default $CIR_DB_REPO)")

    p = sub.add_parser("push", help="snapshot a DB (or take a made snapshot) and push it")
    p.add_argument("path", type=Path, help="live DB, or a <ts>.sqlite made by `snapshot`")
    repo_args(p)
    p.add_argument("--keep", type=int, default=None,
                   help="snapshots kept in the repo (default $CIR_DB_SNAPSHOT_KEEP or 20)")
    p.add_argument("--allow-older", action="store_true",
                   help="let an older snapshot become latest.json (a deliberate rollback)")

    r = sub.add_parser("restore", help="download the latest snapshot to DB (only if DB is absent)")
    r.add_argument("db", type=Path, help="where the DB file goes (stop the app first)")
    repo_args(r)
    r.add_argument("--force", action="store_true",
                   help="replace an existing DB (it is moved aside to <db>.pre-restore-<ts>, not deleted)")

    ls = sub.add_parser("list", help="show latest.json and the snapshots in the repo")
    repo_args(ls)
    return ap


def run(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` and run one subcommand; user errors print one line and return 2."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        if args.cmd == "snapshot":
            snap = snapshot(args.db, args.out)
            print(f"{snap.path}  sha256={snap.meta['sha256']}  rows={snap.meta['row_counts']}")
            return 0
        if not args.repo:
            raise CIRError("no repo: pass --repo or set CIR_DB_REPO")
        remote = remote_from_spec(args.repo)
        if args.cmd == "push":
            with tempfile.TemporaryDirectory(prefix="cir-db-snap-") as tmp:
                made = args.path.with_suffix(".json").is_file() and args.path.suffix == ".sqlite"
                snap = load_snapshot(args.path) if made else snapshot(args.path, tmp)
                keep = args.keep if args.keep is not None else env_number(
                    "CIR_DB_SNAPSHOT_KEEP", DEFAULT_KEEP, int)
                result = push(snap, remote, keep=keep, allow_older=args.allow_older)
            print(f"{result.status}: {result.path} (pruned {len(result.pruned)})")
            return 0
        if args.cmd == "restore":
            result = restore(args.db, remote, force=args.force)
            if result.status == "skipped":
                print(f"{args.db} exists; nothing restored (pass --force to replace it)")
            else:
                print(f"restored {result.snapshot} -> {args.db}"
                      + "".join(f"\n  previous file kept as {p}" for p in result.moved_aside))
            return 0
        pointer = read_latest(remote)
        print(f"{LATEST}: " + (json.dumps(pointer, indent=2, sort_keys=True) if pointer else "none"))
        for f in remote.list_files(f"{SNAP_DIR}/"):
            print(f)
        return 0
    except CIRError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(run())
