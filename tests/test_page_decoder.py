"""Inside a decoder, as the pages show it: the logit lens, attention sinks and the model's make-up on the Language model
page (its own models, offline) and on the Attention page (tiny random GPT-2 and Llama-with-GQA decoders saved as
server folders), in both languages; links into Mechanics, Positions and Anatomy open them in the promised state."""
from __future__ import annotations


import numpy as np
import pytest
import torch

from tests.conftest import assert_clean, figures, plotly_array, markdowns, run_page, widget
from viz_core.lm.lens import logit_lens
from viz_core.lm.training import load_lm
from viz_core.pretrained.head_analysis import sink_shares

pytestmark = pytest.mark.usefixtures("one_torch_thread")
CHECKPOINTS = "viz_core/checkpoints"


def _heatmap(fig: dict) -> dict:
    return next(tr for tr in fig["data"] if tr["type"] == "heatmap")


_array = plotly_array


def _z(fig: dict) -> np.ndarray:
    return _array(_heatmap(fig)["z"]).astype(float)


def _links(at) -> list:
    """(page script, query string) of every page link drawn in the page's main area."""
    return [(el.proto.page, el.proto.query_string) for el in at.main.get("page_link")]


# ---------------------------------------------------------------- the Language model page's own models
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_lens_of_the_character_model_is_the_models_own_prediction_at_the_last_row(lang):
    text = "The cat sleeps. 猫在睡觉。"
    at = run_page("language_model", {"lang": lang, "tab": "decoder", "dec_text_chars": text})
    assert_clean(at)
    [fig] = figures(at)
    lm = load_lm(f"{CHECKPOINTS}/lm_chars")
    probs = torch.softmax(torch.tensor(lm.logits(text)), -1).numpy()  # (N, V): the model's own next-token guess
    z = _z(fig).T  # drawn as (positions, depth): one row per character, top to bottom
    assert z.shape == (lm.config.n_layers + 1, len(text))  # embeddings + one column per block
    np.testing.assert_allclose(z[-1], probs.max(-1), atol=1e-5)
    assert fig["layout"]["xaxis"]["ticktext"] == ["emb" if lang == "en" else "嵌入", "0", "1", "2", "3"]
    assert ("after block" if lang == "en" else "块之后") in fig["layout"]["xaxis"]["title"]["text"]
    assert fig["layout"]["yaxis"]["autorange"] == "reversed"  # the text reads top to bottom
    summary = next(m for m in markdowns(at) if m.startswith(("The model's final guess", "模型的最终猜测")))
    hits = int((probs[:-1].argmax(-1) == np.array(lm.encode(text))[1:]).sum())
    assert f"{hits} of {len(text) - 1}" in summary if lang == "en" else f"{len(text) - 1} 个位置中的 {hits} 个" in summary


def test_lens_colour_by_the_actual_next_token():
    text = "The dog sleeps."
    at = run_page("language_model", {"lang": "en", "tab": "decoder", "dec_text_chars": text, "lens_metric": "next"})
    assert_clean(at)
    z = _z(figures(at)[0]).T
    lens = logit_lens(load_lm(f"{CHECKPOINTS}/lm_chars"), text)
    np.testing.assert_allclose(z[:, :-1], lens.next_prob, atol=1e-6)
    assert np.isnan(z[:, -1]).all()  # the last position has no next token: grey, not a number


def test_induction_model_settles_late_on_a_repeat_and_the_sinks_sum_with_the_rest():
    seq = "5 9 2 7 3 8 1 6 5 9 2 7 3 8 1 6"
    at = run_page("language_model", {"lang": "en", "tab": "decoder", "dec_model": "induction",
                                     "dec_text_induction": seq})
    assert_clean(at)
    lm = load_lm(f"{CHECKPOINTS}/lm_induction")
    lens = logit_lens(lm, seq)
    second = slice(9, 15)  # positions of the second copy, after its first token, that predict the repeat
    assert (lens.next_rank[-1, second] == 0).all()  # the trained model copies the repeat ...
    # ... and only its last block gets it: an induction head needs the previous-token head of the block before
    assert (lens.first_top1[second] == lens.n_rows - 1).all()
    assert (lens.next_rank[1, second] > 0).all()

    at = run_page("language_model", {"lang": "zh", "tab": "decoder", "dec_model": "induction",
                                     "dec_text_induction": seq, "dec_view": "sinks", "sink_of": "rest"})
    assert_clean(at)
    weights = lm.attention(seq).weights
    shares = sink_shares(weights, np.zeros(weights.shape[-1], bool))
    np.testing.assert_allclose(_z(figures(at)[0]), shares.rest, atol=1e-6)
    np.testing.assert_allclose(shares.first + shares.rest, 1, atol=1e-5)


def test_too_long_or_empty_text_is_a_message_not_a_traceback():
    at = run_page("language_model", {"lang": "en", "tab": "decoder", "dec_text_chars": "x" * 300})
    assert_clean(at)
    assert at.error and "128" in at.error[0].value
    assert not figures(at)


def test_architecture_of_our_model_and_links_in_the_right_state():
    at = run_page("language_model", {"lang": "en", "tab": "decoder", "dec_arch": "1"})
    assert_clean(at)
    text = " ".join(markdowns(at))
    assert "multi-head (MHA), 4 query heads and 4 key/value heads" in text
    assert "learned absolute" in text and "LayerNorm, pre-norm" in text
    links = _links(at)
    assert any(p == "mechanics" and q == "section=variants&vdm=4&vh=4&vkv=4" for p, q in links), links
    assert any(p == "positions" and q == "part=learned" for p, q in links), links
    assert any(p == "anatomy" and q == "section=norms" for p, q in links), links


# ---------------------------------------------------------------- Hugging Face decoders on the Attention page
@pytest.fixture(scope="module")
def tiny_decoders(tmp_path_factory):
    """Tiny random GPT-2 and Llama (6 query heads sharing 2 key/value heads) causal LMs saved as folders."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    from tests.pretrained.tiny_models import save_with_default_tokenizer
    torch.manual_seed(0)
    models = {"gpt2": GPT2LMHeadModel(GPT2Config(vocab_size=30522, n_embd=32, n_layer=2, n_head=4, n_positions=64)),
              "llama": LlamaForCausalLM(LlamaConfig(vocab_size=30522, hidden_size=48, intermediate_size=64,
                                                    num_hidden_layers=3, num_attention_heads=6,
                                                    num_key_value_heads=2, max_position_embeddings=64))}
    paths = save_with_default_tokenizer(models, tmp_path_factory.mktemp)
    return {name: (paths[name], model.eval()) for name, model in models.items()}


@pytest.fixture
def folders_allowed(monkeypatch):
    monkeypatch.setenv("ATTN_ALLOW_LOCAL_MODELS", "1")


@pytest.mark.parametrize("name, lang", [("gpt2", "en"), ("llama", "zh")])
def test_logit_lens_view_of_a_hugging_face_decoder(tiny_decoders, folders_allowed, name, lang):
    path, model = tiny_decoders[name]
    text = "the cat sat on the mat"
    at = run_page("attention", {"lang": lang, "model": path, "text": text, "view": "lens"})
    assert_clean(at)
    [fig] = figures(at)
    from viz_core.pretrained import default_model_path
    from transformers import AutoTokenizer
    ids = AutoTokenizer.from_pretrained(default_model_path())(text, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        probs = torch.softmax(model(ids).logits[0].float(), -1)  # (N, V): the model's own prediction
    z = _z(fig).T
    assert z.shape == (model.config.num_hidden_layers + 1, ids.shape[1])
    np.testing.assert_allclose(z[-1], probs.max(-1).values.numpy(), atol=1e-5)


def test_the_lens_is_not_offered_for_an_encoder():
    at = run_page("attention", {"lang": "en", "view": "lens"})
    assert_clean(at)
    assert "lens" not in widget(at, "radio", "attention.view").options
    assert widget(at, "radio", "attention.view").value == "head"  # an encoder falls back to the default view


def test_gqa_model_states_its_groups_and_its_sinks_map_is_outlined(tiny_decoders, folders_allowed):
    path, _ = tiny_decoders["llama"]
    at = run_page("attention", {"lang": "en", "model": path, "view": "sinks", "arch": "1"})
    assert_clean(at)
    text = " ".join(markdowns(at))
    assert "grouped-query (GQA), 6 query heads and 2 key/value heads" in text
    assert "rotary (RoPE)" in text and "RMSNorm, pre-norm" in text
    assert "key/value head 0 ← query heads 0, 1, 2" in text and "key/value head 1 ← query heads 3, 4, 5" in text
    [fig] = figures(at)
    assert _z(fig).shape == (3, 6)
    assert sum(s.get("line", {}).get("dash") == "dot" for s in fig["layout"]["shapes"]) == 2  # two groups of three
    assert ("mechanics", "section=variants&vdm=12&vh=6&vkv=2") in [(p, q)
                                                                      for p, q in _links(at)]


def test_sinks_of_the_default_encoder_count_its_special_tokens():
    at = run_page("attention", {"lang": "en", "view": "sinks", "sink_of": "special", "text": "a dog runs home"})
    assert_clean(at)
    from viz_core.pretrained.bert_numpy import load_default
    r = load_default().attention("a dog runs home")
    shares = sink_shares(r.weights, r.special)
    np.testing.assert_allclose(_z(figures(at)[0]), shares.special, atol=1e-6)
    # the rule is stated truly for an encoder: query 0 sees every key, and what counting it would change is shown
    every = r.weights[..., 0].mean(-1)  # (L, H) over queries 0..N-1
    rule = next(c.value for c in at.caption if "Query 0 is left out" in c.value)
    assert "sees every key" in rule and f"{np.abs(every - shares.first).max():.3f}" in rule
    assert "can see only token 0" not in " ".join(m.value for m in [*at.markdown, *at.caption])


def test_head_view_can_leave_the_first_token_out_of_the_colour_scale():
    at = run_page("attention", {"lang": "en", "text": "a dog runs home", "nosink": "1", "auto": "0", "layer": "4",
                                "head": "5"})  # a head that puts 0.95 of its weight on [CLS]
    assert_clean(at)
    heat = _heatmap(figures(at)[0])
    w = _array(heat["z"]).astype(float)
    assert heat["zmax"] == pytest.approx(w[:, 1:].max(), rel=1e-6)
    assert heat["zmax"] < w.max()  # [CLS]'s column holds larger weights, now drawn in the darkest colour
    assert any("except the first" in c.value for c in at.caption)


# ---------------------------------------------------------------- deep links: the other page opens in that state
def test_a_link_opens_a_visited_page_in_the_linked_state():
    at = run_page("mechanics", {"lang": "zh"})
    assert widget(at, "radio", "mechanics.section").value == "steps"
    at.switch_page("app_pages/language_model.py").run()
    for k, v in {"lang": "zh", "section": "variants", "vdm": "12", "vh": "6", "vkv": "2"}.items():
        at.query_params[k] = v
    at.switch_page("app_pages/mechanics.py").run()
    assert_clean(at)
    assert widget(at, "radio", "mechanics.section").value == "variants"
    assert widget(at, "select_slider", "mechanics.vkv").value == 2
    assert widget(at, "selectbox", "mechanics.vh").value == 6


def test_lens_table_holds_the_lens_numbers_with_blanks_after_the_last_token():
    import csv
    import io

    from app_pages._ui.decoder import lens_csv
    lens = logit_lens(load_lm(f"{CHECKPOINTS}/lm_chars"), "ab 猫")
    names = ["emb"] + [f"b{i}" for i in range(lens.n_rows - 1)]
    rows = list(csv.DictReader(io.StringIO(lens_csv(lens, names))))
    assert len(rows) == lens.n_rows * 4
    cell = rows[2 * 4 + 1]  # row 2, position 1 ("b", followed by " ")
    assert (cell["row_name"], cell["token"], cell["next_token"]) == ("b1", "b", lens.tokens[2])
    assert float(cell["p_next"]) == pytest.approx(lens.next_prob[2, 1], abs=1e-6)
    assert int(cell["rank_next"]) == lens.next_rank[2, 1] + 1 and cell["top1"] == lens.top_tokens[2, 1, 0]
    last = rows[2 * 4 + 3]
    assert last["token"] == "猫" and last["next_token"] == last["p_next"] == last["rank_next"] == ""
