"""`training/rehearse_real.sh` at tiny scale, as CI runs it: the world through the real path
(manifest → build_itt → ITT / L-CIRR training → CIRR-format evaluation → hub push to a folder
remote → app.py serving the pushed checkpoints), beside the same settings trained natively."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("pact", "compose-only", "dice", "pace")


@pytest.mark.skipif(not (ROOT / "assets" / "backbone" / "cir-tiny-vit" / "open_clip_config.json").is_file(),
                    reason="the shipped backbone is not built")
def test_rehearsal_runs_end_to_end_offline(tmp_path):
    out = tmp_path / "rehearsal"
    env = {**os.environ, "REHEARSAL_SCALE": "tiny", "PARALLEL": "1", "PYTHON": sys.executable,
           "CIR_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    env.pop("CIR_LOCAL_HUB", None)
    proc = subprocess.run(["bash", "training/rehearse_real.sh", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    rep = json.loads((out / "report.json").read_text())

    # the app served exactly the pushed checkpoints, fetched from the folder remote
    assert rep["app_check"]["problems"] == []
    assert rep["app_check"]["checkpoints"] == "rehearsal/cir-methods@seed0"
    assert set(rep["app_check"]["columns"]) == set(COLUMNS)
    assert (out / "hub").is_dir()

    rows = {(r["method"], r["benchmark"], r["metric"]): r for r in rep["rows"]}
    assert {m for m, _, _ in rows} == {*COLUMNS, "sum"}
    for m in (*COLUMNS, "sum"):
        for kind in ("rehearsal", "native"):  # the CIRR-format export ranks as the world does
            assert rows[m, "cirr", "R@10"][kind] == rows[m, "world", "R@10"][kind]
    # PACE's L-CIRR export carries the training stream's own images and texts: the same training
    for key in (("cirr", "R@10"), ("cirr", "Rs@1"), ("world", "identity@1")):
        assert rows["pace", *key]["rehearsal"] == rows["pace", *key]["native"]
    # the ITT rules produced a record per caption, of several edit types
    assert rep["itt_records"] > 100 and len(rep["itt_edit_types"]) >= 3
    assert set(rep["pact_bar"]) == {"R@10", "identity@1"}
