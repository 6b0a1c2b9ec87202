"""The one report header (cir_core.report_header): the fields a report passes, the commit,
versions, machine, date and load measured, extra fields after them, and no standard field
overwritten by an extra one."""
import re

import pytest

from cir_core.config import git_commit
from cir_core.report_header import report_header


def test_header_records_what_was_measured_and_where():
    h = report_header(benchmark="cirr", split="val", backbone="ViT-L-14@openai+quickgelu",
                      checkpoints={"searle": "ckpt/searle-vit-l-14"}, device="cpu", command=["python", "-m", "x"],
                      table="dice-1")
    assert (h["benchmark"], h["split"], h["backbone"]) == ("cirr", "val", "ViT-L-14@openai+quickgelu")
    assert h["checkpoints"] == {"searle": "ckpt/searle-vit-l-14"} and h["device"] == "cpu"
    assert h["commit"] == git_commit() and isinstance(h["dirty"], bool)
    assert h["versions"]["python"] and h["versions"]["torch"] and "open_clip_torch" in h["versions"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", h["date"])
    assert h["load"]["cpus"] >= 1 and h["load"]["load_1m"] is not None
    assert h["command"] == "python -m x" and list(h)[-1] == "table"


def test_an_extra_field_cannot_overwrite_a_measured_one():
    with pytest.raises(TypeError, match="'commit' is a standard field"):
        report_header(commit="abc")
