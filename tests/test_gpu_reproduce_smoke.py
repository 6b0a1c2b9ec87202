"""The device check for a lent GPU (bench/gpu_reproduce_smoke.py) runs end to end on the CPU with
the tiny architecture — one trainer's smoke steps and the training-free rows' embedding path — and
appends its rows to a copy of docs/GPU.md, so it cannot rot before a GPU comes."""
import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_thread")


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_reproduce_smoke", ROOT / "bench" / "gpu_reproduce_smoke.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cpu_rehearsal_prints_and_records_each_part(tmp_path, capsys):
    mod = load_script()
    doc = tmp_path / "GPU.md"
    page = (ROOT / "docs" / "GPU.md").read_text(encoding="utf-8")
    doc.write_text(page, encoding="utf-8")
    argv = ["--model", "cir-tiny-vit", "--device", "cpu", "--steps", "2", "--batch", "8", "--only", "dice",
            "--images", "16", "--doc", str(doc)]
    assert mod.main(argv) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    train, embed = lines
    assert train["trainer"] == "dice" and train["steps"] == 2 and train["steps_per_s"] > 0
    assert embed["part"] == "embed" and embed["images"] == 16 and embed["images_per_s"] > 0
    assert set(embed["queries_per_s"]) == {"image-only", "text-only", "sum"} and embed["queries"] == 2
    table = page.split(mod.START)[1].split(mod.END)[0]
    new = doc.read_text(encoding="utf-8").split(mod.START)[1].split(mod.END)[0]
    added = [x for x in new.splitlines() if x not in table.splitlines()]
    assert len(added) == 2 and all("| cpu |" in x and "cir-tiny-vit" in x for x in added)
    assert "| dice |" in added[0] and "embed (16 images, 64 px)" in added[1]
    before = [x for x in table.splitlines() if x.startswith("| ") and "not measured yet" not in x]
    assert new.splitlines()[:len(before) + 1][1:] == before  # earlier rows kept, in order
    assert "not measured yet" not in new and doc.read_text(encoding="utf-8").replace(new, table) == page


def test_a_page_without_the_table_is_refused(tmp_path):
    mod = load_script()
    doc = tmp_path / "x.md"
    doc.write_text("# no table\n")
    with pytest.raises(ValueError, match="no <!-- gpu-reproduce-smoke -->"):
        mod.append_to_doc(doc, ["| row |"])
    assert doc.read_text() == "# no table\n"


def test_wrapper_parses_and_runs_the_script():
    sh = ROOT / "bench" / "gpu_reproduce_smoke.sh"
    subprocess.run(["bash", "-n", str(sh)], check=True)
    assert "bench/gpu_reproduce_smoke.py" in sh.read_text() and (ROOT / "bench" / "gpu_reproduce_smoke.py").is_file()
