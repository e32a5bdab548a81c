"""The packaged MiniLM run in numpy (viz_core.pretrained.bert_numpy) gives what transformers gives: the same tokens, special
and segment masks, truncation and [UNK] counts, and attention weights equal within float32 rounding."""
import numpy as np
import pytest
import torch

from viz_core import pretrained
from viz_core.pretrained import bert_numpy
from viz_core.errors import InputError

CASES = [
    ("The cat sat on the mat because it was tired.", None),
    ("Hello [SEP] world [CLS] ok", "a second one, here"),     # typed special tokens stay text
    ("猫坐在垫子上。 emoji 🙂 ünïcödé", None),                 # [UNK] counted
    ("word " * 700, None),                                    # truncated at 512
    ("short", "pair " * 600),                                 # longest-first truncation of a pair
]


@pytest.fixture(scope="module")
def models():
    return bert_numpy.load_default(), pretrained.load_model("")


@pytest.mark.parametrize("text, pair", CASES)
def test_same_result_as_transformers(models, text, pair):
    nb, hf = models
    a, b = nb.attention(text, pair), pretrained.attention_for(hf, text, pair)
    assert a.tokens == b.tokens
    np.testing.assert_array_equal(a.special, b.special)
    np.testing.assert_array_equal(a.segments, b.segments)
    for field in ("kind", "n_input_tokens", "truncated", "n_unknown", "n_text_tokens", "unk_token"):
        assert getattr(a, field) == getattr(b, field), field
    assert a.weights.dtype == np.float32 and a.weights.shape == b.weights.shape
    np.testing.assert_allclose(a.weights, b.weights, atol=1e-5, rtol=0)
    np.testing.assert_allclose(a.weights.sum(-1), 1.0, atol=1e-5)


def test_info_matches_the_loaded_model(models):
    nb, hf = models
    for field in ("name", "kind", "n_layers", "n_heads", "max_tokens", "supports_pair"):
        assert getattr(nb.info, field) == getattr(hf, field), field


def test_gelu_and_layer_norm_match_torch():
    x = np.linspace(-6, 6, 2001, dtype=np.float32)
    ref = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(bert_numpy.gelu(x), ref, rtol=0, atol=1e-6)  # erf to 1.5e-7, then float32
    rng = np.random.default_rng(0)
    h, g, b = rng.normal(size=(5, 8)).astype(np.float32), rng.normal(size=8).astype(np.float32), \
        rng.normal(size=8).astype(np.float32)
    ref = torch.nn.functional.layer_norm(torch.from_numpy(h), (8,), torch.from_numpy(g), torch.from_numpy(b), 1e-12)
    np.testing.assert_allclose(bert_numpy.layer_norm(h, g, b, 1e-12), ref.numpy(), atol=2e-6)


def test_adopted_weights_give_the_same_result(models):
    """After transformers has loaded the model, the numpy path reads its parameters (one copy in memory)."""
    nb = bert_numpy.load_default()
    before = nb.attention("a small test sentence").weights
    arrays = {k: v.detach().numpy() for k, v in models[1].model.state_dict().items()}
    assert nb.adopt(arrays) > 0
    used = [k for k in nb.w if k.endswith((".weight", ".bias")) and not k.startswith("pooler.")]
    assert len(used) == 6 * 16 + 5 and all(nb.w[k] is arrays[k] for k in used)  # every weight of the forward pass
    np.testing.assert_array_equal(nb.attention("a small test sentence").weights, before)


def test_empty_text_is_an_input_error(models):
    with pytest.raises(InputError):
        models[0].attention("   ")


def test_the_page_cache_holds_the_packaged_weights_once():
    """Whichever of the two forms the server makes second, the numpy one then reads the transformers parameters."""
    from app_pages._ui import models as page_models

    nb, hf = page_models.numpy_default(), page_models.default_model()
    name = "encoder.layer.3.attention.self.query.weight"
    assert np.shares_memory(nb.w[name], dict(hf.model.named_parameters())[name].detach().numpy())
    assert page_models.loaded("")
