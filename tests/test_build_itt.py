"""ITT builder: rules, manifest checks, a fake OpenAI-compatible server, resume, dedup, schema."""
from __future__ import annotations

import json
import random
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cir_core.errors import InputError
from training.build_itt import main
from training.itt import (
    EDIT_TYPES,
    EndpointGenerator,
    HFGenerator,
    TemplateGenerator,
    build,
    load_prompts,
    make_id,
    parse_answer,
    read_manifest,
    rules,
    validate_file,
    validate_record,
)
from training.itt.prompts import AnswerError

CAPTIONS = ["A man riding a red bike down a street.", "Two dogs playing in the grass.",
            "A small cat sitting on a wooden table next to a laptop.", "A man and a dog on a beach."]


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    (tmp_path / "img").mkdir()
    rows = []
    for i, c in enumerate(CAPTIONS):
        (tmp_path / "img" / f"{i}.jpg").write_bytes(b"x")
        rows.append(json.dumps({"path": f"img/{i}.jpg", "caption": c}))
    m = tmp_path / "m.jsonl"
    m.write_text("\n".join(rows) + "\n")
    return m


def lines(p: Path) -> list[dict]:
    return [json.loads(x) for x in p.read_text().splitlines()]


# ---- rules ---------------------------------------------------------------------------------

def test_apply_keeps_articles_and_capitals():
    assert rules.apply("A red apple on a table.", "red", "orange") == "An orange apple on a table."
    assert rules.apply("An old car.", "old", "new") == "A new car."
    assert rules.apply("Dog in a park.", "dog", "cat") == "Cat in a park."
    assert rules.apply("Two dogs playing.", "", ", seen from above") == "Two dogs playing, seen from above."
    assert rules.apply("Two dogs.", "cats", "x") is None


def test_rule_ops_change_what_they_say():
    rng = random.Random(0)
    ch = rules.remove("A man and a dog on a beach.", rng)
    assert ch.clause.endswith("the dog") and rules.apply("A man and a dog on a beach.", ch.old, ch.new) == "A man on a beach."
    ch = rules.background("Two dogs playing in the grass.", rng)
    target = rules.apply("Two dogs playing in the grass.", ch.old, ch.new)
    assert "grass" not in target and target.startswith("Two dogs playing ") and target.endswith(".")
    ch = rules.count("A dog is sleeping.", random.Random(1))
    assert rules.apply("A dog is sleeping.", ch.old, ch.new) in {f"{n.capitalize()} dogs are sleeping." for n in ("two", "three", "four")}
    ch = rules.move("The dog is behind the car.", rng)
    assert rules.apply("The dog is behind the car.", ch.old, ch.new) == "The dog is in front of the car."
    assert rules.background_append("Two dogs playing in the grass.", rng) is None  # no second place
    assert rules.view("A close-up of a pizza.", rng) is None
    ch = rules.background("A man riding a bicycle down a busy city street.", rng)
    assert ch.old == "down a busy city street"
    ch = rules.colour("A red double decker bus.", rng)
    assert ch.old == "red" and "the bus" in ch.clause


@pytest.mark.parametrize("edit_type", EDIT_TYPES)
def test_every_type_on_every_caption(edit_type):
    for cap in CAPTIONS:
        out = rules.generate(cap, edit_type, random.Random(3))
        assert out is not None and out["target_caption"] != cap
        assert out["negatives"][0] == cap and out["target_caption"] not in out["negatives"]
        assert (out["edit"].endswith(".")) == (edit_type != "short")
    two = rules.generate(CAPTIONS[1], "two", random.Random(5))
    assert " and " in two["edit"] and len(two["ops"]) == 2 and len(two["negatives"]) == 3


# ---- template mode, end to end --------------------------------------------------------------

def test_template_cli_end_to_end(manifest, tmp_path, capsys):
    out = tmp_path / "itt.jsonl"
    assert main(["--manifest", str(manifest), "--out", str(out), "--quiet"]) == 0
    recs = lines(out)
    assert len(recs) == len(CAPTIONS) * 5
    assert {(r["image"], r["edit_type"]) for r in recs} == {(f"img/{i}.jpg", t) for i in range(4) for t in EDIT_TYPES}
    for r in recs:
        validate_record(r)
        assert r["negatives"][0] == r["source_caption"] and r["generator"]["mode"] == "template"
    summary = json.loads(capsys.readouterr().out)
    assert summary["written"] == 20 and summary["failed"] == 0
    out2 = tmp_path / "again.jsonl"  # same seed, same bytes; another seed, other edits
    main(["--manifest", str(manifest), "--out", str(out2), "--quiet"])
    assert out2.read_bytes() == out.read_bytes()
    out3 = tmp_path / "seed1.jsonl"
    main(["--manifest", str(manifest), "--out", str(out3), "--quiet", "--seed", "1", "--types", "attribute,scene",
          "--per-caption", "1"])
    assert len(lines(out3)) == 4 and lines(out3) != recs[:4]
    assert main(["--validate", str(out)]) == 0


# ---- manifests --------------------------------------------------------------------------------

@pytest.mark.parametrize("text,msg", [
    ('{"path": "a.jpg", "caption": "A cat."}\n{"path": "a.jpg"}\n', "line 2: 'caption'"),
    ('{"path": "a.jpg", "caption": "A cat."}\n\n{not json\n', "line 3: invalid JSON"),
    ('{"caption": "A cat."}\n', "line 1: no 'path' or 'id'"),
    ('{"path": "missing.jpg", "caption": "A cat."}\n', "line 1: image file"),
    ("path,text\na.jpg,A cat.\n", "line 1: CSV header"),
    ("path,caption\na.jpg,A cat.\na.jpg,  \n", "line 3: 'caption'"),
])
def test_bad_manifest_names_the_line(tmp_path, text, msg):
    (tmp_path / "a.jpg").write_bytes(b"x")
    m = tmp_path / "m.txt"
    m.write_text(text)
    with pytest.raises(InputError, match=msg):
        read_manifest(m)
    out = tmp_path / "o.jsonl"
    assert main(["--manifest", str(m), "--out", str(out), "--quiet"]) == 2 and not out.exists()


def test_csv_manifest_ids_and_repeats(tmp_path):
    m = tmp_path / "m.csv"
    m.write_text('id,caption\nimg7,"A red car, parked."\nimg7,"A red car, parked."\nimg7,A dog.\n')
    src = read_manifest(m)
    assert [(s.image_id, s.caption, s.line) for s in src] == [("img7", "A red car, parked.", 2), ("img7", "A dog.", 4)]


# ---- endpoint mode against a fake OpenAI-compatible server on 127.0.0.1 -----------------------

class FakeLLM:
    """Chat-completions server answering from a script first (status, content), then well."""

    def __init__(self, script: list[tuple[int, str]] | None = None):
        self.script, self.requests, self.lock = list(script or []), [], threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.requests.append((self.path, dict(self.headers), body))
                    status, content = fake.script.pop(0) if fake.script else (200, None)
                if content is None:
                    user = body["messages"][1]["content"]
                    cap = user.split('Source caption: "', 1)[1].split('"\n', 1)[0].rstrip(".")
                    kind = user.split("Edit type: ", 1)[1].split(".", 1)[0]
                    content = json.dumps({"edit": f"Make it {kind}.", "target_caption": f"{cap}, {kind} version.",
                                          "negatives": [f"{cap}, wrong version.", f"{cap}."]})
                payload = (json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]})
                           if status == 200 else '{"error": "boom"}').encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def llm():
    servers = []

    def make(script=None):
        servers.append(FakeLLM(script))
        return servers[-1]
    yield make
    for s in servers:
        s.close()


def test_endpoint_cli_retries_500_and_malformed(manifest, tmp_path, llm, monkeypatch, capsys):
    srv = llm([(500, ""), (200, "Sure! Here is the edit you asked for."), (200, '{"edit": "x"}')])
    monkeypatch.setenv("MY_KEY", "sk-test")
    out = tmp_path / "itt.jsonl"
    rc = main(["--manifest", str(manifest), "--out", str(out), "--endpoint", srv.url, "--model", "fake-7b",
               "--api-key-env", "MY_KEY", "--backoff", "0", "--workers", "3", "--quiet", "--types", "scene,short"])
    assert rc == 0, capsys.readouterr().err
    recs = lines(out)
    assert len(recs) == 8 and all(validate_record(r) for r in recs)
    assert len(srv.requests) == 8 + 3  # one 500 and two malformed answers were re-asked
    path, headers, body = srv.requests[0]
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer sk-test"
    assert body["model"] == "fake-7b" and body["response_format"] == {"type": "json_object"}
    r = next(r for r in recs if r["edit_type"] == "scene" and r["image"] == "img/1.jpg")
    assert r["target_caption"] == "Two dogs playing in the grass, strong scene change version."
    # the source caption comes first among the negatives, once, though the model repeated it
    assert r["negatives"] == ["Two dogs playing in the grass.", "Two dogs playing in the grass, wrong version."]
    assert r["generator"]["mode"] == "endpoint" and r["generator"]["model"] == "fake-7b"
    assert "sk-test" not in out.read_text()
    # resuming with another generator into the same file is refused
    assert main(["--manifest", str(manifest), "--out", str(out), "--quiet"]) == 2
    assert "holds records from" in capsys.readouterr().err


def test_endpoint_gives_up_and_stops(manifest, tmp_path, llm, capsys):
    prompts = load_prompts()
    srv = llm([(503, "")] * 3)
    slept: list[float] = []
    gen = EndpointGenerator(srv.url + "/chat/completions", "m", prompts, retries=2, backoff=0.5, sleep=slept.append)
    with pytest.raises(Exception, match="failed after 3 tries: HTTP 503"):
        gen.generate("A cat.", "attribute", "x")
    assert slept == [0.5, 1.0] and len(srv.requests) == 3
    srv401 = llm([(401, "")])
    out = tmp_path / "o.jsonl"
    assert main(["--manifest", str(manifest), "--out", str(out), "--endpoint", srv401.url, "--model", "m",
                 "--quiet"]) == 2
    assert "HTTP 401" in capsys.readouterr().err
    dead = llm([(200, "no json here")] * 200)
    assert main(["--manifest", str(manifest), "--out", str(out), "--endpoint", dead.url, "--model", "m",
                 "--quiet", "--workers", "1", "--retries", "0", "--max-consecutive-failures", "3"]) == 2
    assert "3 jobs failed in a row" in capsys.readouterr().err


def test_parse_answer():
    ok = parse_answer('```json\n{"edit": "Make it red.", "target_caption": "A red car.", '
                      '"negatives": ["A red car.", "A blue car.", "A blue car", "A car."]}\n```', "A car.")
    assert ok == {"edit": "Make it red.", "target_caption": "A red car.", "negatives": ["A blue car."]}
    for bad in ('{"edit": "Make it red."}', '{"edit": "x", "target_caption": "A car"}', "[1, 2]",
                '{"edit": "A red car.", "target_caption": "A red car."}',
                '{"edit": "x", "target_caption": "A red car.", "negatives": "A blue car."}'):
        with pytest.raises(AnswerError):
            parse_answer(bad, "A car.")


# ---- resume, dedup ----------------------------------------------------------------------------

class Crashing(TemplateGenerator):
    def __init__(self, after: int):
        super().__init__(0)
        self.left = after

    def generate(self, caption, edit_type, job_id):
        if self.left == 0:
            raise KeyboardInterrupt
        self.left -= 1
        return super().generate(caption, edit_type, job_id)


def test_resume_after_interruption_and_truncated_line(manifest, tmp_path):
    full = tmp_path / "full.jsonl"
    build(TemplateGenerator(0), read_manifest(manifest), full, progress=False)
    out = tmp_path / "itt.jsonl"
    with pytest.raises(KeyboardInterrupt):
        build(Crashing(after=7), read_manifest(manifest), out, progress=False)
    assert len(lines(out)) == 7
    with out.open("a") as f:  # a crash mid-write: half a record, no newline
        f.write(full.read_text().splitlines()[7][:50])
    stats = build(TemplateGenerator(0), read_manifest(manifest), out, progress=False)
    assert stats["dropped_partial"] and stats["done_before"] == 7 and stats["written"] == 13
    assert out.read_bytes() == full.read_bytes()
    stats = build(TemplateGenerator(0), read_manifest(manifest), out, progress=False, limit=5)
    assert stats["attempted"] == 0 and stats["written"] == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(full.read_text().splitlines()[0] + "\n{oops}\n")
    with pytest.raises(InputError, match="line 2 is not a valid record"):
        build(TemplateGenerator(0), read_manifest(manifest), bad, progress=False)


def test_limit_counts_only_new_jobs(manifest, tmp_path):
    out = tmp_path / "itt.jsonl"
    assert build(TemplateGenerator(0), read_manifest(manifest), out, limit=6, progress=False)["written"] == 6
    assert build(TemplateGenerator(0), read_manifest(manifest), out, limit=6, progress=False)["written"] == 6
    assert len({r["id"] for r in lines(out)}) == 12


class SameEdit(TemplateGenerator):
    def generate(self, caption, edit_type, job_id):
        return {"edit": "Make it blue.", "target_caption": caption.rstrip(".") + ", in blue.", "negatives": []}


def test_same_image_same_edit_written_once(tmp_path):
    m = tmp_path / "m.jsonl"  # one image, two captions: ten jobs, one (image, edit) pair
    m.write_text('{"id": "a", "caption": "A car."}\n{"id": "a", "caption": "A red car."}\n{"id": "b", "caption": "A dog."}\n')
    out = tmp_path / "o.jsonl"
    stats = build(SameEdit(0), read_manifest(m), out, progress=False)
    assert stats["written"] == 2 and stats["duplicates"] == 13
    assert sorted(r["image_id"] for r in lines(out)) == ["a", "b"]
    assert build(SameEdit(0), read_manifest(m), out, progress=False)["written"] == 0  # pairs on disk count too


# ---- schema -----------------------------------------------------------------------------------

def good() -> dict:
    return {"id": make_id("img1", "A car.", "attribute"), "image": "img/1.jpg", "image_id": "img1",
            "source_caption": "A car.", "edit_type": "attribute", "edit": "Make it red.",
            "target_caption": "A red car.", "negatives": ["A car.", "A blue car."],
            "generator": {"mode": "template", "model": "rules-v1", "seed": 0}}


@pytest.mark.parametrize("change,msg", [
    (lambda r: r.pop("edit"), "missing field"),
    (lambda r: r.update(extra=1), "unknown field"),
    (lambda r: r.update(edit_type="long"), "edit_type"),
    (lambda r: r.update(id="0123456789abcdef"), "does not match"),
    (lambda r: r.update(id="xyz"), "16 lowercase hex"),
    (lambda r: r.update(target_caption="a car"), "source caption"),
    (lambda r: r.update(edit=" "), "'edit' must be non-empty"),
    (lambda r: r.update(negatives=["A red car!"]), "is the target caption"),
    (lambda r: r.update(negatives=["A car.", "a car"]), "repeats"),
    (lambda r: r.update(negatives="A car."), "list"),
    (lambda r: r.update(generator={"mode": "gpt"}), "mode"),
    (lambda r: r.update(ops="colour"), "ops"),
])
def test_validate_record_rejects(change, msg):
    assert validate_record(good()) == good()
    r = good()
    change(r)
    with pytest.raises(InputError, match=msg):
        validate_record(r)


def test_validate_file_reports_lines(tmp_path, capsys):
    f = tmp_path / "f.jsonl"
    r = good()
    f.write_text("\n".join([json.dumps(r), json.dumps(r), json.dumps({**r, "edit_type": "x"}), "{"]) + "\n")
    ok, errors = validate_file(f)
    assert ok == 1 and [e.split(":")[0] for e in errors] == ["line 2", "line 3", "line 4"]
    assert "duplicate id" in errors[0]
    assert main(["--validate", str(f)]) == 1
    assert "line 3" in capsys.readouterr().err


# ---- local transformers -------------------------------------------------------------------------

def test_hf_without_transformers_says_how_to_install(monkeypatch, manifest, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(InputError, match="pip install transformers"):
        HFGenerator("/models/x", load_prompts())
    assert main(["--manifest", str(manifest), "--out", str(tmp_path / "o.jsonl"), "--hf-model", "/m"]) == 2
    assert "pip install transformers" in capsys.readouterr().err


def test_hf_path_with_a_stand_in_transformers(monkeypatch, manifest, tmp_path):
    torch = pytest.importorskip("torch")
    answer = '{"edit": "Make it night.", "target_caption": "The same scene at night.", "negatives": ["At noon."]}'

    class Tok:
        chat_template = "x"
        eos_token_id = 0

        @classmethod
        def from_pretrained(cls, path, local_files_only):
            assert local_files_only
            return cls()

        def apply_chat_template(self, msgs, add_generation_prompt, return_tensors):
            assert msgs[0]["role"] == "system" and "Source caption" in msgs[1]["content"]
            return torch.zeros(1, 3, dtype=torch.long)

        def decode(self, ids, skip_special_tokens):
            assert ids.tolist() == [7, 7]  # only the new tokens
            return answer

    class Model:
        @classmethod
        def from_pretrained(cls, path, local_files_only):
            return cls()

        def to(self, device):
            return self

        def generate(self, ids, **kw):
            return torch.cat([ids, torch.full((1, 2), 7)], 1)

    monkeypatch.setitem(sys.modules, "transformers",
                        types.SimpleNamespace(AutoTokenizer=Tok, AutoModelForCausalLM=Model))
    out = tmp_path / "o.jsonl"
    assert main(["--manifest", str(manifest), "--out", str(out), "--hf-model", "/m", "--quiet",
                 "--types", "scene"]) == 0
    recs = lines(out)
    assert len(recs) == 4 and recs[0]["generator"]["mode"] == "hf" and recs[0]["negatives"][1] == "At noon."
