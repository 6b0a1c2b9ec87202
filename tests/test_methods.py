"""Every registered method through the one interface (timm's test-every-model pattern)."""
import numpy as np
import pytest

from cir_core.errors import InputError
from cir_core.methods import create_method, get_method_class, list_methods
from training.heads import LAMBDA_MAX  # the val search may go past the grid, up to this

ALL = list_methods()


def test_baselines_registered_first():
    assert ALL[:3] == ["text-only", "image-only", "sum"]


def _make(name, backbone):
    """Trained methods load their shipped checkpoint (assets/methods/<name>): it must exist."""
    return create_method(name, backbone)


@pytest.mark.parametrize("name", [n for n in ALL if get_method_class(n).needs_checkpoint])
def test_shipped_checkpoints_load_on_the_shipped_backbone(name):
    from cir_core.backbone import load_backbone

    m = create_method(name, load_backbone())
    assert m.backbone.dim == 256 and 0 < m.chord_lambda <= LAMBDA_MAX


@pytest.mark.parametrize("name", ["pact", "compose-only", "pic2word", "searle", "lincir", "rtd-lincir"])
def test_a_method_that_runs_the_towers_refuses_a_bare_encoder_by_name(name):
    """PACT and the textual-inversion peers run open_clip's text tower themselves: a backbone with
    no `model` / `tokenizer` (a stand-in `Encoder`) is refused with a BackboneError naming the
    method, before any checkpoint is read."""
    from cir_core.errors import BackboneError
    from tests._bench_fixtures import IndexBackbone

    with pytest.raises(BackboneError, match=f"{name} runs the backbone's towers itself.*model or tokenizer"):
        get_method_class(name).checkpoint_needs(IndexBackbone())


@pytest.mark.parametrize("name", ALL)
def test_interface(name, tiny_backbone):
    m = _make(name, tiny_backbone)
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((3, tiny_backbone.dim)).astype(np.float32)
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    texts = ["Make the square blue.", "Move the character to the left. Add a red star.", "at night"]
    q = m.compose(ref, texts)
    assert q.shape == (3, tiny_backbone.dim) and q.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1, atol=1e-5)
    q0 = m.compose_empty(ref)
    assert q0.shape == q.shape and np.isfinite(q0).all()
    # batch composition is row-independent
    np.testing.assert_allclose(m.compose(ref[1:2], texts[1:2])[0], q[1], atol=1e-5)
    steps = m.progression(ref[1], ["Move the character to the left.", "Add a red star."])
    assert len(steps) == 2 and all(s.shape == (tiny_backbone.dim,) for s in steps)
    assert 0 < m.chord_lambda <= LAMBDA_MAX


@pytest.mark.parametrize("name", ALL)
def test_rejects_wrong_dimension(name, tiny_backbone):
    m = _make(name, tiny_backbone)
    with pytest.raises(InputError, match="expected"):
        m.compose(np.ones((1, tiny_backbone.dim + 1), np.float32), ["x"])
    with pytest.raises(InputError):
        m.compose(np.ones((2, tiny_backbone.dim), np.float32), ["only one text"])


def test_baseline_semantics(tiny_backbone):
    ref = np.eye(tiny_backbone.dim, dtype=np.float32)[:2]
    t = tiny_backbone.encode_texts(["make it red", "make it blue"])
    np.testing.assert_allclose(create_method("text-only", tiny_backbone).compose(ref, ["make it red", "make it blue"]), t, atol=1e-5)
    np.testing.assert_allclose(create_method("image-only", tiny_backbone).compose(ref, ["a", "b"]), ref)
    s = ref + t
    np.testing.assert_allclose(create_method("sum", tiny_backbone).compose(ref, ["make it red", "make it blue"]),
                               s / np.linalg.norm(s, axis=1, keepdims=True), atol=1e-5)


def test_unknown_method_names_the_registered_ones():
    with pytest.raises(InputError, match="text-only"):
        get_method_class("no-such-method")


def test_listed_by_their_declared_order():
    from cir_core.methods import register_method, unregister_method
    from cir_core.methods.base import Method

    orders = [get_method_class(n).order for n in ALL]
    assert orders == sorted(orders)
    assert ALL.index("pact") < ALL.index("dice") < ALL.index("pace") < ALL.index("compose-only")

    class Early(Method):
        name, order = "early-plugin", 5

        def _compose(self, refs, texts):
            return refs.emb

    class Late(Early):
        name, order = "late-plugin", Method.order

    register_method(Late)
    register_method(Early)  # registered after Late, listed before it: the declared order decides
    try:
        names = list_methods()
        assert names.index("sum") < names.index("early-plugin") < names.index("pact")
        assert names[-1] == "late-plugin"
    finally:
        unregister_method("early-plugin")
        unregister_method("late-plugin")


def test_which_methods_read_the_whole_text_at_once():
    whole = {n for n in ALL if get_method_class(n).reads_whole_text}
    assert {"pact", "compose-only", "dice", "sum", "pace"} <= whole and "image-only" not in whole


def test_refs_keep_their_fields_aligned():
    from cir_core.methods.refs import Refs, as_refs

    emb = np.eye(4, dtype=np.float32)[:3]
    refs = Refs(emb, np.array([1.0, 2.0, 3.0], np.float32), [5, -1, 7], ["a", "b", "c"], ["x", None, "z"])
    t = refs.take(np.array([2, 0]))
    assert t.rows.tolist() == [7, 5] and t.images == ("c", "a") and t.captions == ("z", "x")
    assert t.norms.tolist() == [3, 1]
    np.testing.assert_array_equal(t.emb, emb[[2, 0]])
    r = refs.repeat(np.array([2, 0, 1]))
    assert r.rows.tolist() == [5, 5, 7] and r.images == ("a", "a", "c") and r.captions == ("x", "x", "z")
    s = refs.take(slice(1, 3))
    assert s.rows.tolist() == [-1, 7] and s.captions == (None, "z")
    assert refs.take(np.array([True, False, True])).images == ("a", "c")
    assert refs.repeat(2).rows.tolist() == [5, 5, -1, -1, 7, 7]
    with pytest.raises(InputError, match="3 references but 2 captions"):
        Refs(emb, captions=["x", "y"])
    one = as_refs(Refs(emb[0], rows=[4], captions=["c"]), 4, "m", "bb")
    assert one.emb.shape == (1, 4) and one.rows.tolist() == [4] and one.captions == ("c",)


@pytest.mark.parametrize("name", ALL)
def test_compose_accepts_the_whole_reference(name, tiny_backbone):
    """Refs carrying a gallery row, an image and a caption compose as the embedding alone does
    (no built-in method reads them yet)."""
    from PIL import Image

    from cir_core.methods.refs import Refs

    m = _make(name, tiny_backbone)
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((2, tiny_backbone.dim)).astype(np.float32)
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    image = Image.new("RGB", (8, 8))
    full = Refs(ref, np.full(2, 30.0, np.float32), [3, -1], [image, image], ["a red star", None])
    texts = ["Make the square blue.", "at night"]
    np.testing.assert_allclose(m.compose(full, texts), m.compose(Refs(ref, full.norms), texts), atol=1e-6)
    np.testing.assert_allclose(m.compose_empty(full), m.compose_empty(Refs(ref, full.norms)), atol=1e-6)
