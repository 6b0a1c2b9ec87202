"""The reproduction matrix (`python -m cir_core.reproduce`): the published registry reads (each row's
values are the numbers of the paper's line it quotes), bad registries are refused naming the row
and the key, `list` says what each row needs, missing inputs skip a row with the reason, and the
rehearsal — the same runner on the world's exports, the shipped backbone and the world-trained
checkpoints — gives its recorded values exactly, marks a perturbed row, and writes the server's
file for a test split without ground truth. docs/REPRODUCE.md is the generated text."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cir_core.reproduce.__main__ import main
from cir_core.reproduce.docs import reproduce_md
from cir_core.reproduce.needs import Sources
from cir_core.reproduce.registry import (
    PUBLISHED,
    REHEARSAL,
    RegistryError,
    load_registry,
    measured_metrics,
    quote_numbers,
)
from cir_core.reproduce.rehearsal import export_datasets
from cir_core.reproduce.runner import run_rows, within

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT.parent / "shared" / "seeds"  # the papers, beside the checkout (absent elsewhere)
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    """The rehearsal registry's exports and one run of every row: (registry, data root, cache, results)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        base = tmp_path_factory.mktemp("rehearsal")
        reg = load_registry("rehearsal")
        export_datasets(reg, base / "data")
        results = run_rows(reg, list(reg.rows), Sources(base / "data"), base / "cache", base / "out", progress=False)
    finally:
        torch.set_num_threads(before)
    return reg, base / "data", base / "cache", results


# -- the registries ---------------------------------------------------------------------------

def test_published_registry_reads_every_table_the_issue_names():
    reg = load_registry("published")
    assert reg.kind == "published" and len(reg.rows) == 90
    assert set(reg.tables) == {"dice-1", "pact-1", "pact-2", "pact-10", "pact-11", "pact-12", "pact-13", "pact-14"}
    assert {r.table for r in reg.rows} == set(reg.tables)
    dice = {r.id: r for r in reg.table_rows("dice-1")}
    assert dice["dice-1:L14:searle:circo"].values == {"mAP@5": 11.68, "mAP@10": 12.73, "mAP@25": 14.33, "mAP@50": 15.12}
    assert dice["dice-1:G14:dice:cirr"].values["Rs@3"] == 92.46
    chord = next(r for r in reg.rows if r.id == "pact-14:L14:pic2word:cirr:chord")
    assert chord.scoring == "chord" and chord.lam == 0.16 and chord.values == {"R@1": 23.44}
    # training-free rows need nothing but data and public weights
    free = [r for r in reg.rows if r.method in ("image-only", "text-only", "sum")]
    assert len(free) == 10
    assert all(reg.checkpoints[r.checkpoint].kind == "none" and r.tolerance == "exact" for r in free)


def test_quotes_are_the_papers_own_lines():
    """Every quoted line is a line of the paper's text, verbatim (where the papers are at hand)."""
    if not SEEDS.is_dir():
        pytest.skip(f"the papers are not beside this checkout ({SEEDS.name}/ not found)")
    reg = load_registry("published")
    for r in reg.rows:
        text = (SEEDS / reg.tables[r.table].text).read_text(encoding="utf-8").splitlines()
        assert r.quote in text, r.id


def test_genecis_summaries_read_as_two_task_means():
    """Table 2's reading: Focus + Change = Attribute + Object (each the sum of the four tasks)."""
    reg = load_registry("published")
    rows = reg.table_rows("pact-2")
    assert len(rows) == 4
    for r in rows:
        for k in (1, 2, 3):
            v = r.values
            assert abs(v[f"focus R@{k}"] + v[f"change R@{k}"] - v[f"attribute R@{k}"] - v[f"object R@{k}"]) <= 0.011
    assert reg.derived["genecis"]["focus R@1"] == ("focus_attribute R@1", "focus_object R@1")


def test_quote_numbers_reads_cells_not_labels():
    assert quote_numbers("CIReVL (GPT-3.5) (ICLR 2024)\t24.55\t52.31") == [24.55, 52.31]
    assert quote_numbers("Pic2Word\t0.16\t$22.82\\to 23.44$\t\u2013") == [0.16, 22.82, 23.44, None]


def write_copy(tmp_path: Path, edit) -> Path:
    raw = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    edit(raw)
    out = tmp_path / "reg.json"
    out.write_text(json.dumps(raw), encoding="utf-8")
    return out


@pytest.mark.parametrize("edit, message", [
    (lambda g: g["rows"][3].update(method="pic3word"),
     "rows[3] (id 'dice-1:L14:text-only:cirr'): key 'method': unknown"),
    (lambda g: g["rows"][3].update(split="train"), "rows[3] (id 'dice-1:L14:text-only:cirr'): key 'split'"),
    (lambda g: g["rows"][3]["values"].update({"R@1": 21.6}),
     "key 'values': 'R@1' is 21.6 but the quoted line prints 21.61"),
    (lambda g: g["rows"][3]["values"].update({"R@2": 1.0}), "key 'values': cirr has no metric 'R@2'"),
    (lambda g: g["rows"][3].pop("tolerance"), "rows[3] (id 'dice-1:L14:text-only:cirr'): missing key 'tolerance'"),
    (lambda g: g["rows"][3].update({"lambda": 0.34}), "key 'lambda': a finite λ goes with scoring 'chord' only"),
    (lambda g: g["rows"][3].update(checkpoint="searle-L14"), "text-only takes no checkpoint"),
    (lambda g: g["rows"][3].update(protocol="keep-reference"), "key 'protocol': cirr takes no protocol"),
    (lambda g: g["rows"][4].update(id=g["rows"][3]["id"]), "rows[4]: duplicate id"),
    (lambda g: g["checkpoints"]["searle-L14"].pop("convert"), "checkpoints['searle-L14']: missing key 'convert'"),
    (lambda g: g["tolerances"]["exact"].update(points=-1), "tolerances['exact']: key 'points'"),
])
def test_bad_registry_is_refused_naming_the_row_and_key(tmp_path, edit, message):
    with pytest.raises(RegistryError) as e:
        load_registry(write_copy(tmp_path, edit))
    assert message in str(e.value) and "reg.json" in str(e.value)


def test_within_is_the_tolerance_plus_the_printed_rounding():
    reg = load_registry("published")
    row = next(r for r in reg.rows if r.tolerance == "exact")
    assert within(reg, row, 23.90, 23.904) and within(reg, row, 23.90, 23.8951)
    assert not within(reg, row, 23.90, 23.906) and not within(reg, row, 23.90, 23.89)
    rel = next(r for r in reg.rows if r.tolerance == "release")
    assert within(reg, rel, 23.90, 24.40) and not within(reg, rel, 23.90, 24.41)


# -- list, skip, docs ---------------------------------------------------------------------------

def test_list_names_every_row_and_what_it_needs(capsys, tmp_path):
    assert main(["list", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    reg = load_registry("published")
    assert all(r.id in out for r in reg.rows)
    assert "open_clip 'ViT-L-14' pretrained='openai'" in out and "'ViT-bigG-14' pretrained='laion2b_s39b_b160k'" in out
    assert "https://github.com/miccunifi/SEARLE/releases/download/weights/SEARLE_ViT-L14.pt" in out
    assert "python -m cir_core.methods.convert searle SEARLE_ViT-L14.pt ckpt/searle-vit-l-14" in out
    assert "python -m training.train_dice --config training/configs/dice_vitl14.json" in out
    assert out.count("=> cannot run here") == len(reg.rows) and "can run here\n" not in out
    assert main(["list", "--registry", "rehearsal", "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 13 and all(n["here"] is False for x in lines for n in x["needs"] if n["what"] == "data")


def test_rows_without_their_inputs_are_skipped_with_the_reason(tmp_path, capsys):
    """Nothing of the published rows is here: every row is skipped, saying what is missing."""
    out = tmp_path / "out"
    assert main(["run", "pact-14", "--root", str(tmp_path / "none"), "--out", str(out), "--quiet"]) == 0
    rep = json.loads((out / "pact-14.json").read_text())
    assert rep["summary"]["skipped"] == 18 and len(rep["rows"]) == 18
    r = next(x for x in rep["rows"] if x["id"] == "pact-14:L14:lincir:cirr:chord")
    assert "no folder" in r["reason"] and "not in the local cache" in r["reason"]
    assert "lincir_large.pt" in r["reason"] and rep["header"]["commit"]
    md = (out / "pact-14.md").read_text()
    assert md.count("| skipped: ") == 18 and "commit `" in md
    assert main(["run", "pact-14", "--rows", "nothing:*", "--root", str(tmp_path)]) == 2
    assert "--rows: 'nothing:*' matches no row" in capsys.readouterr().err
    assert main(["run", "pact-99", "--root", str(tmp_path)]) == 2
    assert "no table 'pact-99'" in capsys.readouterr().err


def test_reproduce_md_is_generated_from_the_registries():
    text = reproduce_md(load_registry("published"), load_registry("rehearsal"))
    committed = (ROOT / "docs" / "REPRODUCE.md").read_text(encoding="utf-8")
    assert committed == text, "docs/REPRODUCE.md is stale: python -m cir_core.reproduce docs --out docs/REPRODUCE.md"
    for r in load_registry("published").rows:
        assert f"`{r.id}`" in text
    assert "needs data (cirr), weights ViT-L-14 openai, evaluation server, GPU" in text  # a training-free row


# -- the rehearsal ------------------------------------------------------------------------------

def test_rehearsal_gives_its_recorded_values_exactly(rehearsal):
    reg, _, _, results = rehearsal
    assert reg.kind == "rehearsal" and reg.recorded["commit"]
    assert [r.status for r in results] == ["reproduced"] * len(reg.rows), \
        [(r.row.id, r.status, r.reason) for r in results]
    for r in results:
        assert r.compared and all(abs(c["delta"]) < 5e-5 for c in r.compared), r.row.id
    by = {r.row.id: r for r in results}
    assert by["world:pact:cirr:chord"].lam == 0.34 and by["world:dice:cirr:chord"].lam is not None
    assert "remove-reference" in by["world:sum:circo:remove-reference"].protocol
    assert "targetpad" in by["world:searle:circo:targetpad"].protocol
    genecis = by["world:lincir:genecis"].measured
    assert genecis["change R@1"] == pytest.approx(genecis["mean R@1"])  # both: the two change tasks' mean


def test_metric_names_are_the_evaluators(rehearsal):
    reg, _, _, results = rehearsal
    known = measured_metrics()
    for r in results:
        got = set(r.measured) - set(reg.derived.get(r.row.benchmark, {}))
        assert got <= set(known[r.row.benchmark]), (r.row.id, got - set(known[r.row.benchmark]))
        if r.row.benchmark in ("cirr", "circo", "lcirr"):
            assert got == set(known[r.row.benchmark])


def test_a_perturbed_row_is_marked_never_hidden(rehearsal, tmp_path, capsys):
    reg, data, cache, _ = rehearsal
    raw = json.loads(REHEARSAL.read_text(encoding="utf-8"))
    row = next(x for x in raw["rows"] if x["id"] == "world:sum:cirr")
    row["values"]["R@5"] = round(row["values"]["R@5"] + 1.0, 4)
    path = tmp_path / "perturbed.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["run", "world", "--registry", str(path), "--root", str(data), "--out", str(out), "--cache-dir", str(cache),
            "--quiet"]
    assert main(argv) == 1
    rep = json.loads((out / "world.json").read_text())
    assert rep["summary"]["outside"] == 1 and rep["summary"]["reproduced"] == len(raw["rows"]) - 1
    bad = next(x for x in rep["rows"] if x["id"] == "world:sum:cirr")
    c = next(c for c in bad["compared"] if c["metric"] == "R@5")
    assert bad["status"] == "outside" and c["within"] is False and c["delta"] == pytest.approx(-1.0)
    md = (out / "world.md").read_text()
    line = next(x for x in md.splitlines() if "`world:sum:cirr`" in x and "| R@5 |" in x)
    assert "**OUTSIDE**" in line and "-1.000000" in line


def test_a_split_without_ground_truth_writes_the_server_file(rehearsal, tmp_path):
    """CIRR test1 as released has no target_hard: the row writes both submission files."""
    reg, data, cache, _ = rehearsal
    root = tmp_path / "cirr"
    shutil.copytree(data / "world-cirr", root)
    caps = root / "captions" / "cap.rc2.test1.json"
    entries = json.loads(caps.read_text())
    caps.write_text(json.dumps([{k: v for k, v in e.items() if k not in ("target_hard", "target_soft")}
                                for e in entries]))
    rows = [r for r in reg.rows if r.id in ("world:sum:cirr", "world:pact:cirr:chord")]
    out = tmp_path / "out"
    results = run_rows(reg, rows, Sources(data={"world-cirr": root}), cache, out, progress=False)
    for r in results:
        assert r.status == "server" and not r.compared and len(r.files) == 2, r.reason
        sub = json.loads(Path(r.files[0]).read_text())
        assert sub["version"] == "rc2" and sub["metric"] == "recall" and len(sub) == len(entries) + 2
        assert "upload" in r.reason


def test_rehearse_command_exports_and_runs(rehearsal, tmp_path, capsys):
    """`rehearse` on an existing export folder: the same report, every row reproduced."""
    reg, data, cache, _ = rehearsal
    out = tmp_path / "r"
    shutil.copytree(data, out / "data")
    shutil.copytree(cache, out / "cache")
    assert main(["rehearse", "--out", str(out), "--quiet"]) == 0
    rep = json.loads((out / "all.json").read_text())
    assert rep["summary"]["reproduced"] == len(reg.rows) and rep["header"]["registry_kind"] == "rehearsal"


def test_weights_are_found_in_the_hugging_face_cache(tmp_path, monkeypatch):
    """`list` says a tag's weights are here when huggingface_hub's cache holds open_clip's file
    (laid out as huggingface_hub lays it out: refs/main -> snapshots/<rev>/<file>)."""
    from huggingface_hub import constants

    from cir_core.backbone import cached_weights
    from cir_core.reproduce.needs import weights_here

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    reg = load_registry("published")
    b32 = reg.backbones["B32"]
    assert cached_weights("ViT-B-32", "openai") is None and not weights_here(b32)
    repo = tmp_path / "models--timm--vit_base_patch32_clip_224.openai"  # open_clip's hf_hub entry for the tag
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    snap = repo / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "open_clip_model.safetensors").write_bytes(b"x")
    assert cached_weights("ViT-B-32", "openai") == str(snap / "open_clip_model.safetensors")
    assert weights_here(b32) and cached_weights("ViT-B-32", "no-such-tag") is None


def test_bad_files_or_checkpoints_skip_their_rows_with_the_reason(rehearsal, tmp_path):
    """A dataset whose files are broken, and a checkpoint of another method, skip only their rows."""
    reg, data, cache, _ = rehearsal
    broken = tmp_path / "circo"
    shutil.copytree(data / "world-circo", broken)
    (broken / "annotations" / "test.json").write_text("[{\"id\": 0}]")
    rows = [r for r in reg.rows if r.id in ("world:sum:circo", "world:pact:cirr:chord", "world:sum:cirr")]
    sources = Sources(data, {"world-circo": broken}, checkpoint={"shipped-pact": ROOT / "assets" / "methods" / "dice"})
    got = {r.row.id: r for r in run_rows(reg, rows, sources, cache, None, progress=False)}
    assert got["world:sum:circo"].status == "skipped" and "test.json entry 0: missing key" in got["world:sum:circo"].reason
    assert got["world:pact:cirr:chord"].status == "skipped" and got["world:pact:cirr:chord"].reason.startswith("pact: ")
    assert got["world:sum:cirr"].status == "reproduced"


def test_record_writes_a_run_into_a_rehearsal_registry_only(rehearsal, tmp_path):
    from cir_core.reproduce.rehearsal import record
    from cir_core.reproduce.report import build_report

    reg, _, _, results = rehearsal
    report = build_report(reg, "all", results, "cpu")
    report["rows"][0]["measured"]["R@1"] += 1.0  # as if this run had measured another value
    copy = tmp_path / "rehearsal.json"
    copy.write_text(REHEARSAL.read_text(encoding="utf-8"), encoding="utf-8")
    assert record(copy, report) == len(reg.rows)
    again = load_registry(copy)
    first = again.rows[0]
    assert first.values["R@1"] == round(results[0].measured["R@1"] + 1.0, 4)
    assert again.recorded["commit"] == report["header"]["commit"] and again.rows[1:] == reg.rows[1:]
    with pytest.raises(RegistryError, match="only a rehearsal registry records"):
        record(PUBLISHED, report)
