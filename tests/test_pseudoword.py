"""cir_core.methods.pseudoword: the one pseudo-word-at-a-placeholder that PACT and the zero-shot
peers share (prompts, tokenizer checks, first / every placeholder)."""
import numpy as np
import pytest
import torch

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from cir_core.errors import BackboneError
from cir_core.methods import get_method_class
from cir_core.methods.pact_model import PACTComposer, PACTConfig
from cir_core.methods.pseudoword import EMPTY_PROMPT, PROMPT, PseudoWord, edit_prompt, fill, token_id, token_width


def word_embedding(backbone, word):
    ids = [int(t) for t in backbone.tokenizer([word])[0] if int(t) != 0]
    assert len(ids) == 3, ids
    return backbone.model.token_embedding.weight[ids[1]]


def features(x):
    return torch.nn.functional.normalize(x, dim=-1).numpy()


def test_the_prompts_are_defined_once():
    assert PROMPT == "a photo of $ that {edit}" and EMPTY_PROMPT == "a photo of $"
    for name in ("searle", "lincir"):
        cls = get_method_class(name)
        assert cls.prompt is PROMPT and cls.empty_prompt is EMPTY_PROMPT
    # PACT's rule and the peers' differ only as their code does: case and the final period
    assert edit_prompt("Paint it  red.") == "a photo of $ that paint it red"
    assert fill(PROMPT, "Paint it  red.") == "a photo of $ that Paint it red."
    assert edit_prompt("") == EMPTY_PROMPT


@pytest.mark.parametrize("replace, n_hits", [("first", 1), ("all", 2)])
def test_first_or_every_placeholder(tiny_backbone, replace, n_hits):
    word = PseudoWord(tiny_backbone.tokenizer, tiny_backbone.model, "$", replace)
    tokens = word.tokenize(["$ on $ facing left"])
    assert int(word.mask(tokens).sum()) == n_hits and word.positions(tokens).tolist() == [1]
    dog = word_embedding(tiny_backbone, "dog")
    with torch.no_grad():
        q = word.encode(tokens, dog[None])
    text = "dog on $ facing left" if replace == "first" else "dog on dog facing left"
    np.testing.assert_allclose(features(q), tiny_backbone.encode_texts([text]), atol=1e-5)


def test_the_tokenizer_and_the_prompts_are_checked(tiny_backbone):
    word = PseudoWord(tiny_backbone.tokenizer, tiny_backbone.model)
    assert word.id == token_id(tiny_backbone.tokenizer, "$") and word.width == token_width(tiny_backbone.model)
    with pytest.raises(BackboneError, match="not in prompt 1 'a photo of dog'"):
        word.tokenize(["a photo of $", "a photo of dog"])
    with pytest.raises(BackboneError, match="not found in prompt row 1"):
        word.mask(tiny_backbone.tokenizer(["a photo of $", "a photo of dog"]))

    class Splitting:  # a tokenizer that does not keep the placeholder whole
        def __call__(self, texts):
            return torch.tensor([[1, 7, 8, 2]])

    with pytest.raises(BackboneError, match="into 2 tokens; a pseudo-word needs it to be one token"):
        token_id(Splitting(), "$")
    with pytest.raises(BackboneError, match="no open_clip CLIP text tower"):
        token_width(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="replace must be one of"):
        PseudoWord(tiny_backbone.tokenizer, tiny_backbone.model, "$", "some")


def test_pact_and_the_peers_read_the_pseudo_word_the_same_way(tiny_backbone):
    """At LoRA zero, PACT's tower copy with a word at `$` is SEARLE's frozen tower with it."""
    composer = PACTComposer(tiny_backbone, PACTConfig(mapper_hidden=16, lora_rank=2)).eval()
    searle = get_method_class("searle")(tiny_backbone)
    assert isinstance(composer.word, PseudoWord) and isinstance(searle.text, PseudoWord)
    dog = word_embedding(tiny_backbone, "dog")[None]
    prompts = [edit_prompt("add a red star")]
    with torch.no_grad():
        pact = composer.encode_with_token(composer.tokenize_prompts(prompts), dog)
        peer = searle.text.encode(searle.text.tokenize(prompts), dog)
    np.testing.assert_allclose(features(pact), features(peer), atol=1e-5)
