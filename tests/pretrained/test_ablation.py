"""viz_core.pretrained.ablation.head_importance against independent implementations: a copy of the model whose output
projection W_O has that head's input columns zeroed (zero ablation) or folded into its bias (mean ablation), one forward per head, the
metric recomputed by hand. Tiny random models from configs (fixtures of tests/pretrained/test_load.py), plus MiniLM."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from tests.pretrained.test_load import tiny_bert, tiny_gpt2, tiny_t5, tokenizer_dir  # noqa: F401 - shared fixtures
from viz_core.pretrained import ablation as hi
from viz_core.errors import InputError

A, B = "The cat sat on the mat.", "A dog lay on the rug."


# ---------------------------------------------------------------- the reference: edit the weights, one head a time
def _w_o_slice(module: torch.nn.Module, head: int, n_heads: int) -> tuple[torch.Tensor, slice, int]:
    """(W_O as (d_out, d_in), the head's input columns, d_out axis) for nn.Linear and GPT-2's Conv1D (d_in, d_out)."""
    conv = type(module).__name__ == "Conv1D"
    w = module.weight.T if conv else module.weight           # (d_out, d_in) view
    d_head = w.shape[1] // n_heads
    return w, slice(head * d_head, (head + 1) * d_head), conv


def _edited(m, part: str, layer: int, head: int, mean: torch.Tensor | None):
    """A deep copy of the loaded model with head (layer, head) removed from W_O; mean ablation adds W_O[:, h] mean."""
    m2 = copy.copy(m)
    m2.model = copy.deepcopy(m.model)
    module = hi.output_projections(m2, part)[layer]
    w, cols, _ = _w_o_slice(module, head, m.n_heads)
    with torch.no_grad():
        if mean is not None:
            shift = w[:, cols] @ mean                        # (d_out,)
            if module.bias is None:
                module.bias = torch.nn.Parameter(torch.zeros(w.shape[0]), requires_grad=False)
            module.bias += shift
        w[:, cols] = 0.0
    return m2


def _clean_means(m, enc: dict, part: str, layer: int, head: int) -> torch.Tensor:
    """The head's output averaged over positions, read by a plain forward hook: (d_head,)."""
    seen = {}
    module = hi.output_projections(m, part)[layer]
    handle = module.register_forward_pre_hook(lambda _m, args: seen.setdefault("x", args[0][0].clone()))
    with torch.no_grad():
        m.model(**enc)
    handle.remove()
    x = seen["x"]                                            # (N, H * d_head)
    d = x.shape[-1] // m.n_heads
    return x[:, head * d:(head + 1) * d].mean(0)


def _embedding(m, text: str) -> np.ndarray:
    enc = m.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        return m.model(**enc).last_hidden_state[0].mean(0).numpy()  # mean pooling over all tokens


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _reference_pair(m, layer: int, head: int, method: str) -> float:
    """cos(pool(A), pool(B)) of the edited model (each text with its own mean for mean ablation)."""
    embs = []
    for text in (A, B):
        mean = _clean_means(m, dict(m.tokenizer(text, return_tensors="pt")), "self", layer, head) \
            if method == "mean" else None
        embs.append(_embedding(_edited(m, "self", layer, head, mean), text))
    return _cos(*embs)


# ---------------------------------------------------------------- encoder (BERT family)
@pytest.mark.parametrize("method", ["zero", "mean"])
def test_bert_pair_equals_weight_edit_reference(tiny_bert, method):
    r = hi.head_importance(tiny_bert, A, B, method=method)
    assert r.effect.shape == (3, 4) and r.metric == "pair_cosine" and r.method == method
    assert r.baseline == pytest.approx(_cos(_embedding(tiny_bert, A), _embedding(tiny_bert, B)), abs=1e-5)
    for layer, head in [(0, 0), (1, 3), (2, 1)]:
        assert r.ablated[layer, head] == pytest.approx(_reference_pair(tiny_bert, layer, head, method), abs=2e-5)
    np.testing.assert_allclose(r.effect, r.ablated - r.baseline, atol=1e-6)


def test_bert_single_text_measures_the_turn_of_its_embedding(tiny_bert):
    r = hi.head_importance(tiny_bert, A)
    assert r.metric == "self_cosine" and r.baseline == pytest.approx(1.0, abs=1e-5)
    assert (r.effect <= 1e-5).all() and r.effect.min() < 0
    ref = _cos(_embedding(_edited(tiny_bert, "self", 1, 2, None), A), _embedding(tiny_bert, A))
    assert r.ablated[1, 2] == pytest.approx(ref, abs=2e-5)


@pytest.mark.parametrize("method", ["zero", "mean"])
def test_growing_batch_equals_plain_batches(tiny_bert, method):
    obj = hi.objective(tiny_bert, A, B)
    plan = [(layer, head) for layer in range(3) for head in range(4)]
    grown = hi.growing_scores(tiny_bert, obj, "self", method)
    plain = hi.ablated_scores(tiny_bert, obj, plan, "self", method)
    assert grown[0] == pytest.approx(hi._intact(tiny_bert, obj), abs=1e-6)
    np.testing.assert_allclose(grown[1:], plain, atol=1e-5)


def test_chunks_give_the_same_scores(tiny_bert, monkeypatch):
    obj = hi.objective(tiny_bert, A, B)
    plan = [(layer, head) for layer in range(3) for head in range(4)]
    whole = hi.ablated_scores(tiny_bert, obj, plan)
    monkeypatch.setattr(hi, "CHUNK_BYTES", 1)  # one row per forward
    np.testing.assert_allclose(hi.ablated_scores(tiny_bert, obj, plan), whole, atol=1e-6)


@pytest.mark.parametrize("method", ["zero", "mean"])
def test_decoder_rows_from_their_own_layer_equal_whole_passes(tiny_gpt2, monkeypatch, method):
    """A decoder's ablations run from the knocked-out layer's intact input (layerwise.ablated_from_layer_inputs);
    every row from the embeddings gives the same scores, in one chunk or in chunks of one row."""
    from viz_core.pretrained import layerwise
    obj = hi.objective(tiny_gpt2, A)
    plan = [(layer, head) for layer in range(tiny_gpt2.n_layers) for head in range(tiny_gpt2.n_heads)][::-1]
    from_layers = hi.ablated_scores(tiny_gpt2, obj, plan, "self", method)
    monkeypatch.setattr(layerwise, "layer_blocks", lambda m: None)  # every row from the embeddings
    whole = hi.ablated_scores(tiny_gpt2, obj, plan, "self", method)
    np.testing.assert_allclose(from_layers, whole, atol=1e-5)
    monkeypatch.undo()
    monkeypatch.setattr(hi, "CHUNK_BYTES", 1)
    np.testing.assert_allclose(hi.ablated_scores(tiny_gpt2, obj, plan, "self", method), whole, atol=1e-5)


def test_a_decoder_whose_layers_do_not_fit_takes_whole_passes(tiny_gpt2, monkeypatch):
    """Where the layer-by-layer paths fail (a layer called in another way), ablation and integrated gradients fall
    back to whole passes, with the same numbers."""
    from viz_core.pretrained import attribution, layerwise
    obj = hi.objective(tiny_gpt2, A)
    plan = [(1, 0), (0, 3)]
    rows, ig = hi.ablated_scores(tiny_gpt2, obj, plan), attribution.integrated_gradients(tiny_gpt2, obj, 4)

    def fail(*_args, **_kwargs):
        raise TypeError("a layer called in another way")
    monkeypatch.setattr(layerwise, "_calls", fail)
    np.testing.assert_allclose(hi.ablated_scores(tiny_gpt2, obj, plan), rows, atol=1e-5)
    again = attribution.integrated_gradients(tiny_gpt2, obj, 4)
    np.testing.assert_allclose(again[0], ig[0], atol=1e-5)
    assert again[1:] == pytest.approx(ig[1:], abs=1e-5)


# ---------------------------------------------------------------- decoder-only (GPT-2) and encoder-decoder (T5)
def _next_logprob(m, text: str, target_id: int) -> float:
    enc = m.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        h = m.model(**enc).last_hidden_state[0, -1]
        logits = h @ m.model.get_input_embeddings().weight.T  # GPT-2's LM head is tied to wte
    return float(torch.log_softmax(logits, -1)[target_id])


def test_gpt2_next_token_logprob_equals_reference(tiny_gpt2):
    r = hi.head_importance(tiny_gpt2, A)
    assert r.metric == "next_logprob" and r.effect.shape == (2, 4) and r.target_token
    enc = tiny_gpt2.tokenizer(A, return_tensors="pt")
    with torch.no_grad():
        h = tiny_gpt2.model(**enc).last_hidden_state[0, -1]
    assert r.target_id == int((h @ tiny_gpt2.model.get_input_embeddings().weight.T).argmax())  # top prediction
    assert r.baseline == pytest.approx(_next_logprob(tiny_gpt2, A, r.target_id), abs=1e-4)
    for layer, head in [(0, 1), (1, 3)]:
        ref = _next_logprob(_edited(tiny_gpt2, "self", layer, head, None), A, r.target_id)
        assert r.ablated[layer, head] == pytest.approx(ref, abs=1e-4)


def test_gpt2_chosen_target_and_mean(tiny_gpt2):
    r = hi.head_importance(tiny_gpt2, A, method="mean", target="dog")
    assert r.target_id == tiny_gpt2.tokenizer("dog", add_special_tokens=False)["input_ids"][0]
    enc = dict(tiny_gpt2.tokenizer(A, return_tensors="pt"))
    mean = _clean_means(tiny_gpt2, enc, "self", 1, 0)
    ref = _next_logprob(_edited(tiny_gpt2, "self", 1, 0, mean), A, r.target_id)
    assert r.ablated[1, 0] == pytest.approx(ref, abs=1e-4)
    assert hi.head_importance(tiny_gpt2, A, target=r.target_id).baseline == pytest.approx(r.baseline, abs=1e-6)


def _target_logprob(m, source: str, target: str) -> float:
    """sum_t log p(y_t | y_<t, source) with the tied head (T5 rescales the decoder output by d_model^-1/2)."""
    enc = m.tokenizer(source, return_tensors="pt")
    labels = m.tokenizer(text_target=target)["input_ids"]
    dec = torch.tensor([[m.model.config.decoder_start_token_id] + labels[:-1]])
    with torch.no_grad():
        h = m.model(**enc, decoder_input_ids=dec).last_hidden_state[0] * m.model.config.d_model ** -0.5
        logp = torch.log_softmax(h @ m.model.get_input_embeddings().weight.T, -1)
    return float(logp[torch.arange(len(labels)), torch.tensor(labels)].sum())


@pytest.mark.parametrize("part, shape", [("encoder", (2, 4)), ("decoder", (3, 4)), ("cross", (3, 4))])
def test_t5_target_logprob_equals_reference(tiny_t5, part, shape):
    r = hi.head_importance(tiny_t5, A, target=B, part=part)
    assert r.metric == "target_logprob" and r.part == part and r.effect.shape == shape
    assert r.baseline == pytest.approx(_target_logprob(tiny_t5, A, B), abs=1e-4)
    ref = _target_logprob(_edited(tiny_t5, part, 1, 2, None), A, B)
    assert r.ablated[1, 2] == pytest.approx(ref, abs=1e-4)


# ---------------------------------------------------------------- the packaged MiniLM and bad input
def test_minilm_baseline_is_sentence_transformers_cosine():
    st_mod = pytest.importorskip("sentence_transformers")
    from viz_core.pretrained import default_model_path, load_model
    m = load_model()
    r = hi.head_importance(m, A, B)
    assert r.effect.shape == (6, 12) and np.isfinite(r.effect).all() and np.abs(r.effect).max() > 1e-4
    emb = st_mod.SentenceTransformer(default_model_path(), device="cpu").encode([A, B])
    assert r.baseline == pytest.approx(_cos(emb[0], emb[1]), abs=1e-4)


@pytest.mark.parametrize("kwargs, code", [(dict(method="max"), "importance.bad_method"),
                                          (dict(part="cross"), "importance.bad_part"),
                                          (dict(text=""), "attention.empty_text")])
def test_bad_input_is_an_input_error(tiny_bert, kwargs, code):
    args = dict(text=A) | kwargs
    with pytest.raises(InputError) as exc:
        hi.head_importance(tiny_bert, args.pop("text"), **args)
    assert exc.value.code == code


def test_t5_needs_a_target(tiny_t5):
    with pytest.raises(InputError) as exc:
        hi.head_importance(tiny_t5, A)
    assert exc.value.code == "importance.need_target"


def test_public_api_is_exported():
    import viz_core
    from viz_core import head_importance, token_attribution
    assert "head_importance" in viz_core.__all__ and "token_attribution" in viz_core.__all__
    assert callable(head_importance) and callable(token_attribution)
