"""docs/API.md's example, run as a user runs it: the clone installed with pip (into a folder of its
own, the dependencies being this interpreter's), the block copied out of the page and executed in a
fresh interpreter from a folder outside the clone, printing the shipped world's top-k. And the top
level: lazy, curated."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def example() -> str:
    text = (REPO / "docs" / "API.md").read_text(encoding="utf-8")
    return re.search(r"## Ten lines, on the shipped world\n\n```python\n(.*?)```", text, re.S).group(1)


@pytest.mark.slow
def test_the_documented_example_runs_from_an_install(tmp_path) -> None:
    code = example()
    assert len([line for line in code.splitlines() if line.strip()]) <= 10
    # `pip install <clone>` from a copy: setuptools builds in the source tree, and a stale build/ in the
    # clone would carry files the clone no longer has into the wheel.
    clone = tmp_path / "clone"
    shutil.copytree(REPO, clone, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "runs", "cache", ".whl", ".gl", "__pycache__", ".*_cache"))
    site = tmp_path / "site"  # what the wheel carries (code, assets, scripts) and nothing else
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(site), str(clone)], capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr[-3000:]
    assert (site / "bin" / "cir-app").is_file() and (site / "bin" / "cir-eval").is_file()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "example.py").write_text(code + "print('from', cir_core.__file__)\n")
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1", "CIR_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "example.py"], cwd=tmp_path / "run", env=env, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[-1] == f"from {site / 'cir_core' / '__init__.py'}"  # the installed copy, not the clone
    tops = [line for line in lines if line.startswith(("PACT", "DiCE", "PACE", "compose-only"))]
    assert len(tops) == 4 and all(len(line.split()[-5:]) == 5 for line in tops)
    assert any("✓test/" in line for line in tops)  # the world's ground truth, found by someone
    assert lines[-3].startswith("methods: ") and "pact" in lines[-3]
    scores = eval(lines[-2])  # noqa: S307 - our own printed dict
    assert set(scores) == {"pact", "sum"} and all(0 <= v <= 1 for v in scores.values())
    assert "Traceback" not in out.stderr and "Warning" not in out.stderr, out.stderr[-2000:]


def test_the_top_level_is_curated_and_lazy() -> None:
    code = ("import sys, cir_core; assert 'torch' not in sys.modules, 'import cir_core loaded torch'; "
            "names = cir_core.__all__; assert 'load_engine' in names and 'evaluate' in names; "
            "[getattr(cir_core, n) for n in names]; print(len(names))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    import cir_core

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        cir_core.nope  # noqa: B018


def test_load_engine_refuses_unknown_settings() -> None:
    import cir_core

    with pytest.raises(TypeError, match="unknown engine settings \\['galery'\\]"):
        cir_core.load_engine(galery="world")
