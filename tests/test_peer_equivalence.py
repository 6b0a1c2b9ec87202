"""The authors' released checkpoints, converted by `python -m cir_core.methods.convert` with its
defaults, compose what the authors' own inference composes (≤ 1e-5), on a random-init ViT-B-32.

Each oracle below re-implements one official forward path from the authors' code (read at
miccunifi/SEARLE@a9c314b `src/utils.py: extract_pseudo_tokens_with_phi`,
`src/encode_with_pseudo_tokens.py`, `src/validate.py`; navervision/lincir@1dec42d
`encode_with_pseudo_tokens.py: encode_with_pseudo_tokens_HF`, `validate.py`;
google-research/composed_image_retrieval@8c05329 `model/model.py: encode_text_img_retrieval`,
`src/eval_utils.py: evaluate_cirr`), written against the open_clip model's modules and nothing
of cir_core: φ reads the *raw* image feature `encode_image(x)`; the prompt is tokenized whole
(context 77, no trimming); the pseudo-token replaces the first `$` (SEARLE), every `$` (LinCIR) or
the `*` at the first row's position (Pic2Word); the EOT feature is projected.
"""
import json

import numpy as np
import open_clip
import pytest
import torch
from PIL import Image
from torch import nn

import cir_core  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads OpenMP)
from cir_core.backbone import load_backbone
from cir_core.gallery import EmbeddingCache, Gallery
from cir_core.methods import create_method
from cir_core.methods.convert import main as convert_main
from cir_core.methods.refs import Refs

CAPTIONS = ["has two dogs of different breed", "is the same bridge at night with people on it",
            "shows a red car parked on the street"]
DOLLAR, EOT = 259, 49407  # SEARLE: "259 is the token of $"; CLIP's end-of-text id


class AuthorsPhi(nn.Module):
    """SEARLE `src/phi.py` (LinCIR `models.py` copies it)."""

    def __init__(self, input_dim, hidden_dim, output_dim, dropout):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(input_dim, hidden_dim), nn.GELU(), nn.Dropout(p=dropout),
                                    nn.Linear(hidden_dim, hidden_dim), nn.GELU(), nn.Dropout(p=dropout),
                                    nn.Linear(hidden_dim, output_dim))

    def forward(self, x):
        return self.layers(x)


class AuthorsIM2TEXT(nn.Module):
    """Pic2Word `model/model.py: IM2TEXT`."""

    def __init__(self, embed_dim=512, middle_dim=512, output_dim=512, n_layer=2, dropout=0.1):
        super().__init__()
        self.fc_out = nn.Linear(middle_dim, output_dim)
        layers, dim = [], embed_dim
        for _ in range(n_layer):
            layers.append(nn.Sequential(nn.Linear(dim, middle_dim), nn.Dropout(dropout), nn.ReLU()))
            dim = middle_dim
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.fc_out(x)


def run_tower(model, x, tokens_for_eot):
    """+ positional, the causal transformer, ln_final, the EOT position's feature @ projection."""
    x = x + model.positional_embedding
    x = model.transformer(x, attn_mask=model.attn_mask)
    x = model.ln_final(x)
    return x[torch.arange(x.shape[0]), tokens_for_eot] @ model.text_projection


def searle_oracle(model, phi, images, captions):
    """`extract_pseudo_tokens_with_phi` + `encode_with_pseudo_tokens` (first `$`)."""
    tokens = open_clip.tokenize([f"a photo of $ that {c}" for c in captions])
    pseudo = phi(model.encode_image(images))  # raw image features
    x = model.token_embedding(tokens)
    first = (tokens == DOLLAR).int().argmax(1)
    x[torch.arange(len(tokens)), first] = pseudo
    return run_tower(model, x, tokens.argmax(dim=-1))


def lincir_oracle(model, phi, images, captions):
    """`encode_with_pseudo_tokens_HF`: every `$` takes the token (`torch.where(text == 259, ...)`)."""
    tokens = open_clip.tokenize([f"a photo of $ that {c}" for c in captions])
    pseudo = phi(model.encode_image(images))
    x = torch.where(tokens.unsqueeze(-1) == DOLLAR, pseudo.unsqueeze(1), model.token_embedding(tokens))
    return run_tower(model, x, tokens.argmax(dim=-1))


def pic2word_oracle(model, img2text, images, captions):
    """`evaluate_cirr`: `encode_text_img_retrieval(text_with_blank, img2text(encode_image(ref)),
    split_ind=id('*'), repeat=False)`: the token goes where the first row has `*`; EOT by id."""
    tokens = open_clip.tokenize([f"a photo of * , {c}" for c in captions])
    star = int(open_clip.tokenize(["*"])[0][1])
    tokens_img = img2text(model.encode_image(images))
    x = model.token_embedding(tokens)
    at = int((tokens[0] == star).nonzero()[0])
    x = torch.cat([x[:, :at], tokens_img.view(len(tokens), 1, -1), x[:, at + 1:]], dim=1)
    return run_tower(model, x, (tokens == EOT).nonzero()[:, 1])


@pytest.fixture(scope="module")
def vitb32():
    return load_backbone("ViT-B-32")  # random weights, seed 0: the real architecture


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """Three images unlike each other (sizes, content), so their raw feature norms differ."""
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("photos")
    arrays = [rng.integers(0, 255, (180, 240, 3)), np.full((300, 200, 3), (200, 40, 40)),
              (np.linspace(0, 255, 256)[None, :, None] * np.ones((128, 1, 3)))]
    for i, a in enumerate(arrays):
        Image.fromarray(a.astype(np.uint8)).save(folder / f"{i}.png")
    return folder


def convert_release(name, state, key, tmp_path):
    """The authors' torch.save layout, converted by the command line with its defaults."""
    src = tmp_path / f"{name}.pt"
    torch.save({"epoch": 1, key: state}, src)
    out = tmp_path / name
    assert convert_main([name, str(src), str(out), "--backbone", "ViT-B-32", "--allow-pickle"]) == 0
    return out


@pytest.mark.parametrize("name", ["searle", "lincir", "pic2word"])
def test_a_converted_release_composes_what_the_authors_code_composes(name, vitb32, photos, tmp_path):
    torch.manual_seed({"searle": 1, "lincir": 2, "pic2word": 3}[name])
    width = int(vitb32.model.token_embedding.weight.shape[1])
    if name == "pic2word":
        phi = AuthorsIM2TEXT(vitb32.dim, 512, width).eval()
        folder, oracle = convert_release(name, {f"module.{k}": v for k, v in phi.state_dict().items()},
                                         "state_dict_img2text", tmp_path), pic2word_oracle
    else:
        phi = AuthorsPhi(vitb32.dim, 4 * vitb32.dim, width, 0.5).eval()
        folder, oracle = convert_release(name, phi.state_dict(), "Phi", tmp_path), \
            (searle_oracle if name == "searle" else lincir_oracle)
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["arch"]["raw_input"] is True and cfg["extra"]["converted_from"]["phi_input"].startswith("raw")

    gallery = Gallery.from_folder(photos)
    emb, norms = EmbeddingCache(tmp_path / "cache").embed(gallery, vitb32, with_norms=True)
    assert norms.std() / norms.mean() > 1e-3  # the images' raw norms differ
    method = create_method(name, vitb32, folder)
    ours = method.compose(Refs(emb, norms), CAPTIONS)
    images = torch.stack([vitb32.preprocess(gallery.load_image(i)) for i in range(len(gallery))])
    with torch.no_grad():
        theirs = torch.nn.functional.normalize(oracle(vitb32.model, phi, images, CAPTIONS), dim=-1).numpy()
    assert np.abs(ours - theirs).max() <= 1e-5
    # one scale for every image (the old conversion) is measurably not what the authors compose
    method.arch.raw_input, method.arch.input_scale = False, float(norms.mean())
    assert np.abs(method.compose(emb, CAPTIONS) - theirs).max() > 1e-5


def test_a_raw_input_method_says_what_it_misses(vitb32, tmp_path):
    from cir_core.errors import InputError

    phi = AuthorsPhi(vitb32.dim, 4 * vitb32.dim, int(vitb32.model.token_embedding.weight.shape[1]), 0.5)
    method = create_method("searle", vitb32, convert_release("searle", phi.state_dict(), "Phi", tmp_path))
    v = np.eye(1, vitb32.dim, dtype=np.float32)
    with pytest.raises(InputError, match="reads the raw image feature.*re-embed the gallery"):
        method.compose(v, ["is red"])  # an embedding alone carries no raw norm
    with pytest.raises(InputError, match="raw image feature"):
        method.compose(Refs(v, np.array([np.nan], np.float32)), ["is red"])
