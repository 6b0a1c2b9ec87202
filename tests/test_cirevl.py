"""CIReVL: the world's rules rewriter (caption + instruction → the target's description), the
training-caption bank captioner, the OpenAI-compatible captioner / rewriter (a fake server), the
method's queries and its val-chosen λ file."""
import json
import random
from types import SimpleNamespace

import httpx
import numpy as np
import pytest
from PIL import Image

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from cir_core.errors import InputError
from cir_core.methods import create_method
from cir_core.methods.cirevl import CIReVL, CIReVLConfig, GivenCaptioner, val_lambda, world_bank
from cir_core.methods.cirevl_llm import ChatClient, EndpointCaptioner, EndpointRewriter, edited_description
from cir_core.methods.cirevl_rules import RulesRewriter, describe, parse_caption, sentence_edits
from cir_core.methods.refs import Refs
from cir_core.world.data import make_queries
from cir_core.world.language import caption
from cir_core.world.spec import HELD_OUT_OBJECTS, sample_scene

pytestmark = pytest.mark.usefixtures("one_thread")


def test_captions_parse_back_to_their_scene():
    rng = random.Random(0)
    for _ in range(300):
        scene, named = sample_scene(rng), rng.random() < 0.5
        text = caption(scene, rng, name=named)
        got, was_named = parse_caption(text)
        assert was_named == named and got.key_without_identity() == scene.key_without_identity()
        if named:
            assert got.character.identity == scene.character.identity
    assert parse_caption("A photo of a dog on a sofa.") is None


def test_the_rules_rewrite_the_true_caption_into_the_target():
    r = RulesRewriter()
    qs = make_queries("val", 200)
    missed = []
    for q in qs:  # every edit type, long ones included
        got = parse_caption(r.rewrite(q.ref_caption, q.text))
        assert got is not None, q.text
        if got[0].key_without_identity() != q.target.key_without_identity():
            missed.append(q.text)
    # only a terse "with a big purple star" misses: it names no position (any free one fits)
    assert len(missed) < 10 and all(any(len(c) > 1 for c in sentence_edits(t)) for t in missed), missed
    scene, named = parse_caption(qs[0].ref_caption)
    assert r.rewrite(qs[0].ref_caption, "") == describe(scene, named)  # q_∅: the caption, same phrasing
    assert sentence_edits("make the star blue and remove the square") is not None


def test_what_the_rules_cannot_apply_is_kept_or_falls_back():
    r = RulesRewriter()
    cap = "Ada on the left facing right in a sandy beach, with a small red star on the right."
    assert r.rewrite(cap, "Make the photo look vintage.") == "Make the photo look vintage."  # CIReVL's fallback
    out = r.rewrite(cap, "Make the star blue. Make the photo look vintage.")
    assert out.endswith(" Make the photo look vintage.") and "blue star" in out
    assert r.rewrite(cap, "Make the circle blue.") == "Make the circle blue."  # no circle was captioned
    assert r.rewrite("a dog on a sofa", "make it a cat") == "make it a cat"
    assert r.rewrite("a dog on a sofa", "") == "a dog on a sofa"


def test_the_world_bank_holds_training_captions_only():
    bank = world_bank(300)
    assert len(bank) == len(set(bank)) > 250 and bank == world_bank(300)  # cached, same
    scenes = [parse_caption(t) for t in bank]
    assert all(s is not None for s in scenes)
    # the training stream holds no held-out combination (an unnamed character's identity is unknown)
    assert not any(s.is_novel() for s, named in scenes if named)
    assert not any((o.shape, o.colour) in HELD_OUT_OBJECTS for s, _ in scenes for o in s.objects)
    assert any(q.reference.is_novel() for q in make_queries("test", 200))


def test_queries_are_the_descriptions_text(tiny_backbone, monkeypatch):
    monkeypatch.setenv("CIR_CIREVL_BANK_SIZE", "200")
    m = create_method("cirevl", tiny_backbone)
    assert m.kinds == ("bank", "rules") and m.app_role == "optional"
    v = tiny_backbone.encode_images([Image.new("RGB", (64, 64), c) for c in ("red", "navy")])
    v = v[0] if isinstance(v, tuple) else v
    texts = ["Make the star blue.", "Set the scene in a starry night."]
    caps, desc = m.descriptions(v, texts)
    assert all(c in m.captioner.texts for c in caps)
    np.testing.assert_allclose(m.compose(v, texts), tiny_backbone.encode_texts(desc), atol=1e-6)
    empty = [RulesRewriter().rewrite(c, "") for c in caps]
    np.testing.assert_allclose(m.compose_empty(v), tiny_backbone.encode_texts(empty), atol=1e-6)


def test_a_real_backbone_needs_a_configured_model():
    real = SimpleNamespace(id="ViT-L-14@openai+quickgelu", dim=768)
    with pytest.raises(InputError, match="CIR_CIREVL_ENDPOINT.*CIR_CIREVL_MODEL"):
        CIReVL(real, {"arch": {}})
    with pytest.raises(InputError, match="CIR_CIREVL_CAPTION_BANK"):
        CIReVL(real, {"arch": {"endpoint": "http://llm.local/v1", "model": "m"}})
    m = CIReVL(real, {"arch": {"endpoint": "http://llm.local/v1", "model": "m", "captioner": "given"}})
    assert isinstance(m.captioner, GivenCaptioner) and isinstance(m.rewriter, EndpointRewriter)
    with pytest.raises(InputError, match="needs a caption with every reference"):
        m.captioner.caption(Refs(np.ones((1, 768), np.float32)))
    assert m.captioner.caption(Refs(np.ones((1, 768), np.float32), captions=["a cat"])) == ["a cat"]
    assert CIReVLConfig.from_env({"CIR_CIREVL_BANK_SIZE": "7", "CIR_CIREVL_MODEL": "x"}).bank_size == 7


def fake_server(answers, seen):
    def handle(request):
        seen.append(json.loads(request.content))
        status, text = answers.pop(0)
        return httpx.Response(status, json={"choices": [{"message": {"content": text}}]})
    return httpx.MockTransport(handle)


def test_the_endpoint_rewriter_asks_as_the_official_code(monkeypatch):
    seen = []
    server = fake_server([(500, ""), (200, "Instruction: x\nEdited Description: a red car on a road")], seen)
    client = ChatClient("http://llm.local/v1", "gpt-x", "k", transport=server, sleep=lambda s: None)
    r = EndpointRewriter(client)
    assert r.rewrite("a car on a road", "make it red") == "a red car on a road"
    assert r.rewrite("a car on a road", "make it red") == "a red car on a road" and len(seen) == 2  # retried once, then remembered
    body = seen[-1]
    assert body["model"] == "gpt-x" and body["temperature"] == 0 and body["max_tokens"] == 700
    prompt = body["messages"][0]["content"]
    assert prompt.endswith("\nImage Content: a car on a road\nInstruction: make it red")
    assert r.rewrite("a car", "") == "a car" and len(seen) == 2  # nothing to edit: no request
    assert edited_description("no such line", "make it red") == "make it red"
    bad = ChatClient("http://llm.local/v1", "m", transport=fake_server([(401, "no")], []), sleep=lambda s: None)
    with pytest.raises(InputError, match="HTTP 401.*CIR_CIREVL_ENDPOINT"):
        bad.ask("hi")
    with pytest.raises(InputError, match="http"):
        ChatClient("llm.local", "m")


def test_the_endpoint_captioner_sends_the_image():
    seen = []
    cap = EndpointCaptioner(ChatClient("http://vlm.local", "vlm", transport=fake_server([(200, " a red square ")], seen)))
    img = Image.new("RGB", (8, 8), "red")
    assert cap.caption(Refs(np.ones((1, 4), np.float32), images=[img])) == ["a red square"]
    parts = seen[0]["messages"][0]["content"]
    assert parts[0]["type"] == "text" and parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    with pytest.raises(InputError, match="needs the reference image"):
        cap.caption(Refs(np.ones((1, 4), np.float32)))


def test_the_val_chosen_lambda_is_used_only_where_it_was_chosen(tiny_backbone, tmp_path):
    m = CIReVL(tiny_backbone, {"arch": {"bank_size": 50}})
    path = tmp_path / "lambda.json"
    assert val_lambda(m, path)[0] == m.chord_lambda and "missing" in val_lambda(m, path)[1]
    path.write_text(json.dumps({"backbone": tiny_backbone.id, "config": m.config_key(), "chord_lambda": 1.5}))
    assert val_lambda(m, path)[0] == 1.5
    other = CIReVL(tiny_backbone, {"arch": {"bank_size": 60}})
    lam, note = val_lambda(other, path)
    assert lam == other.chord_lambda and "another configuration" in note


def test_offered_as_an_optional_column_with_its_lambda_step():
    from cir_core.methods import extra_methods
    from training.trainers import get_trainer, list_trainers

    assert "cirevl" in extra_methods()
    assert get_trainer("cirevl-lambda").module == "training.cirevl_lambda" and "cirevl-lambda" in list_trainers()
