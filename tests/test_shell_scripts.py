"""The resumable shell scripts (training/*.sh) name Python modules that must exist: a typo there
surfaces only after an hour of training (rebuild.sh once called `cir_core.chord_analysis`, a
module that had moved to `cir_core.eval.chord_analysis`; it is `studies.chord_analysis` now)."""
from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "training").glob("*.sh"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_parses_and_its_modules_exist(script: Path) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True)
    modules = set(re.findall(r"-m\s+([A-Za-z_][\w.]*)", script.read_text()))
    assert modules, f"{script.name} runs no python module?"
    missing = sorted(m for m in modules if importlib.util.find_spec(m) is None)
    assert not missing, f"{script.name} runs modules that do not exist: {missing}"
