"""docs/ and the README stay true for a reader: no leftover placeholder (a bare `COVERAGE_TABLE`
line, TODO, FIXME, ...) and no absolute path of the machine they were written on (a reader's
machine has none of them: `/work/...`, `/home/<someone>/...`, a worktree under /tmp, this very
checkout's path). Example paths a reader can use as they are (`/tmp/check`, `/data/cirr`) pass.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = {".md", ".json", ".jsonl", ".txt", ".csv"}

# A line that is only an ALL_CAPS_NAME (a template slot never filled), or a marker word.
PLACEHOLDER_LINE = re.compile(r"^\s*[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\s*$")
MARKERS = re.compile(r"\b(?:TODO|FIXME|TBD|XXX+|PLACEHOLDER)\b|\{\{[^}]*\}\}|[Ll]orem ipsum")
# Roots that exist only on the machines this project is built on, and temporary folders a run
# leaves its name in (git worktrees, pytest's and tempfile's folders, the app's own).
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|root|home|mnt|Users|scratch)/[\w.+-]"
                          r"|(?<![\w.~-])/tmp/(?:wt|pytest-of-|tmp|cir-app-|cir-test-|cache-)[\w.+-]*")


def _files() -> list[Path]:
    return [ROOT / "README.md"] + sorted(p for p in (ROOT / "docs").rglob("*")
                                         if p.is_file() and p.suffix in TEXT)


def _local_roots() -> list[str]:
    """Absolute paths of the machine running the test that must not appear either."""
    roots = {str(ROOT), sys.prefix, str(Path.home())}
    return sorted(r for r in roots if r.count("/") >= 2)  # never "/" or "/root" alone as a prefix


def problems(files: list[Path], local: list[str]) -> list[str]:
    """'file:line: what' for every placeholder and build-machine path in `files`."""
    out = []
    for path in files:
        fenced = False
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{n}"
            if path.suffix == ".md" and line.lstrip().startswith("```"):
                fenced = not fenced
            if path.suffix == ".md" and not fenced and PLACEHOLDER_LINE.match(line):
                out.append(f"{where}: placeholder {line.strip()!r}")
            if path.suffix == ".md" and MARKERS.search(line):
                out.append(f"{where}: marker {MARKERS.search(line).group(0)!r}")
            m = MACHINE_PATH.search(line)
            if m:
                out.append(f"{where}: build-machine path {line[m.start():m.end() + 30].split()[0]!r}")
            out += [f"{where}: this machine's path {r!r}" for r in local if r in line]
    return out


def test_docs_have_no_placeholder_and_no_build_machine_path():
    found = problems(_files(), _local_roots())
    assert not found, "\n".join(found)


def test_the_check_finds_what_it_looks_for(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("Intro.\n\nCOVERAGE_TABLE\n\nTODO: numbers\n\n```\nCIR_CACHE_DIR\n```\n"
                   "python3.11 -m venv /work/venv-zerogpu\n\"expected_from\": \"/tmp/wt_head/runs\"\n"
                   "in /srv/checkout-7/x\nfine: /tmp/check, /data/cirr, ~/frames, /usr/lib/postgresql/15/bin, "
                   "a pseudo-word placeholder\n")
    found = problems([doc], ["/srv/checkout-7"])
    assert [f.split(": ", 1)[1].split(" ")[0] for f in found] == ["placeholder", "marker", "build-machine",
                                                                   "build-machine", "this"]
    assert all(":3:" in f or ":5:" in f or ":10:" in f or ":11:" in f or ":12:" in f for f in found)
