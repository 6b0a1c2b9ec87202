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
