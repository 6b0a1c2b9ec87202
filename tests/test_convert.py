"""`python -m cir_core.methods.convert`: pickles refused unless asked for, then read with
weights_only=True; the command line's one-line errors. (Each method's own layout: test_pic2word,
test_searle, test_lincir.)"""
import json
import os

import pytest
import torch
from torch import nn

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from cir_core.checkpoint import read_state_file
from cir_core.errors import CheckpointError, InputError
from cir_core.methods.convert import convert, main


def searle_layout(path, dim=256, width=128):
    phi = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Dropout(0.5), nn.Linear(4 * dim, 4 * dim),
                        nn.GELU(), nn.Dropout(0.5), nn.Linear(4 * dim, width))
    sd = {f"layers.{k}": v for k, v in phi.state_dict().items()}
    torch.save({"epoch": 1, "Phi": sd}, path)
    return sd


class Payload:
    """What a malicious pickle does: run a call while it is being loaded."""

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (os.makedirs, (self.target,))


def test_pickles_need_the_flag_and_then_hold_only_tensors(tiny_backbone, tmp_path):
    searle_layout(tmp_path / "phi.pt")
    with pytest.raises(CheckpointError, match="is a pickle.*--allow-pickle.*weights_only=True"):
        convert("searle", tmp_path / "phi.pt", tmp_path / "out", tiny_backbone)
    assert not (tmp_path / "out").exists()
    evil = tmp_path / "evil.pt"
    torch.save({"Phi": {}, "x": Payload(str(tmp_path / "pwned"))}, evil)
    with pytest.raises(CheckpointError, match="cannot read .*evil.pt with torch.load\\(weights_only=True\\)"):
        read_state_file(evil, allow_pickle=True)
    assert not (tmp_path / "pwned").exists()  # the payload never ran
    with pytest.raises(CheckpointError, match="not found"):
        read_state_file(tmp_path / "nope.pt", allow_pickle=True)
    with pytest.raises(InputError, match="not a textual-inversion method"):
        convert("dice", tmp_path / "phi.pt", tmp_path / "out", tiny_backbone, allow_pickle=True)


def test_the_command_line(tmp_path, capsys):
    searle_layout(tmp_path / "phi.pt")
    out = tmp_path / "searle"
    assert main(["searle", str(tmp_path / "phi.pt"), str(out), "--backbone", "cir-tiny-vit"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "--allow-pickle" in err and err.count("\n") == 1
    assert main(["searle", str(tmp_path / "phi.pt"), str(out), "--backbone", "cir-tiny-vit", "--allow-pickle",
                 "--chord-lambda", "0.2", "--input-scale", "7"]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["chord_lambda"] == 0.2 and cfg["arch"]["input_scale"] == 7.0 and cfg["backbone"].startswith("cir-tiny-vit")
    assert len(cfg["extra"]["converted_from"]["sha256"]) == 64 and "wrote" in capsys.readouterr().out
    searle_layout(tmp_path / "wide.pt", dim=512, width=512)
    assert main(["lincir", str(tmp_path / "wide.pt"), str(tmp_path / "x"), "--backbone", "cir-tiny-vit",
                 "--allow-pickle"]) == 2
    err = capsys.readouterr().err
    assert "wide.pt" in err and "layers.0.weight has shape (2048, 512)" in err and "Traceback" not in err
