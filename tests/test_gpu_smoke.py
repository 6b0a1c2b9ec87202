"""The GPU smoke script runs every trainer end to end on CPU (tiny backbone, 2 steps, batch 8)."""
import json

import pytest

from training.gpu_smoke import default_trainers, main

pytestmark = pytest.mark.usefixtures("one_thread")
KEYS = {"trainer", "model", "device", "steps", "batch", "steps_per_s", "samples_per_s", "peak_mem_gb",
        "final_loss"}


def test_cpu_smoke_prints_one_json_line_per_trainer(capsys):
    records = main(["--model", "cir-tiny-vit", "--steps", "2", "--batch", "8", "--device", "cpu"])
    lines = [json.loads(l) for l in capsys.readouterr().out.splitlines() if l.startswith("{")]
    assert lines == records and [r["trainer"] for r in lines] == default_trainers()
    for r in lines:
        assert "error" not in r and KEYS <= set(r)
        assert r["model"] == "cir-tiny-vit" and r["device"] == "cpu" and r["steps"] == 2 and r["batch"] == 8
        assert r["peak_mem_gb"] is None and r["steps_per_s"] > 0
        assert r["samples_per_s"] == pytest.approx(8 * r["steps_per_s"], rel=0.01)
        assert r["final_loss"] == r["final_loss"] and r["final_loss"] > 0  # finite, not NaN
    assert set(default_trainers()) == {"pact", "dice", "pace"}
    pact = next(r for r in lines if r["trainer"] == "pact")
    assert pact["identity_steps"] == 1 and pact["joint_steps"] == 1  # both PACT phases ran
