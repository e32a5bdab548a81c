"""AppTest of the Attention page: every view renders real content, URL state restores it, bad input is a message."""
from __future__ import annotations

import pytest

from streamlit.testing.v1 import AppTest

from tests.conftest import APP, APP_TIMEOUT_S, assert_clean, run_page, widget


def _plots(at):
    return at.get("plotly_chart")


def test_default_view_english():
    at = run_page("attention", {"lang": "en"})
    assert_clean(at)
    assert at.title[0].value == "Attention in a pretrained Transformer"
    assert "all-MiniLM-L6-v2" in at.markdown[0].value and "6 layers × 12 heads" in at.markdown[0].value
    assert len(_plots(at)) == 1
    assert not at.error


@pytest.mark.parametrize("view", ["grid", "lines", "aggregate", "stats", "export"])
def test_every_view_in_chinese(view):
    at = run_page("attention", {"lang": "zh", "view": view, "layer": "2", "head": "5"})
    assert_clean(at)
    assert at.title[0].value == "预训练 Transformer 的注意力"
    assert widget(at, "radio", "attention.view").value == view
    assert widget(at, "selectbox", "attention.layer").value == 2 and widget(at, "selectbox", "attention.head").value == 5
    if view in ("grid", "aggregate", "stats"):
        assert len(_plots(at)) == 1
    if view == "export":
        assert len(at.get("download_button")) == 2
    if view == "lines":
        assert len(at.get("iframe")) == 1


def test_url_state_is_written_back():
    at = run_page("attention", {"lang": "en"})
    widget(at, "selectbox", "attention.layer").set_value(4).run()
    at.text_area(key="attention.text").set_value("Colorless green ideas sleep furiously.").run()
    assert_clean(at)
    assert at.query_params["layer"] == ["4"] or at.query_params["layer"] == "4"
    assert "Colorless" in str(at.query_params["text"])


def test_hide_special_and_pair_blocks():
    at = run_page("attention", {"lang": "en", "text": "The cat sat.", "pair": "It purred.", "hide": "1"})
    assert_clean(at)
    assert any("renormalised" in i.value for i in at.info)
    widget(at, "radio", "attention.block").set_value("A->B").run()
    assert_clean(at)
    assert len(_plots(at)) == 1


@pytest.mark.parametrize("text", ["   ", "\x00\x01", "<script>alert('x')</script>", "🙂" * 50, "中文句子测试",
                                  "[SEP] [CLS] [MASK]", "مرحبا"])
def test_bad_or_odd_input_never_raises(text):
    at = run_page("attention", {"lang": "en", "text": text})
    assert_clean(at)
    if not text.strip() or text == "\x00\x01":
        assert at.error and "empty" in at.error[0].value
    else:
        assert not at.error and len(_plots(at)) == 1


@pytest.mark.parametrize("lang, words", [("en", ["13 of 18 tokens", "[UNK]", "bert-base-chinese"]),
                                         ("zh", ["18 个词元中有 13 个", "[UNK]", "bert-base-chinese"])])
def test_chinese_on_the_default_model_explains_unknown_tokens(lang, words):
    at = run_page("attention", {"lang": lang, "text": "我爱自然语言处理，注意力机制很有趣。"})
    assert_clean(at)
    assert at.info and all(w in at.info[0].value for w in words)
    assert len(_plots(at)) == 1


def test_english_has_no_unknown_token_note():
    at = run_page("attention", {"lang": "en", "text": "The cat sat on the mat."})
    assert not any("[UNK]" in i.value for i in at.info)


@pytest.mark.parametrize("hide, words", [("1", "sum to 1 again only because"), ("0", "do not sum to 1 (row sums")])
def test_max_over_heads_caption_says_what_the_shown_rows_sum_to(hide, words):
    at = run_page("attention", {"lang": "en", "view": "aggregate", "agg": "max", "hide": hide})
    assert_clean(at)
    captions = " ".join(c.value for c in at.caption)
    assert words in captions and "The strongest head at each cell" in captions
    at = run_page("attention", {"lang": "zh", "view": "aggregate", "agg": "mean", "hide": hide})
    assert "图中每行之和为 1" in " ".join(c.value for c in at.caption)


def test_long_input_is_truncated_with_note():
    at = run_page("attention", {"lang": "en", "text": " ".join(["token"] * 3000), "view": "grid"})
    assert_clean(at)
    assert at.warning and "512" in at.warning[0].value


def test_unknown_model_falls_back(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ATTN_ALLOW_ANY_HUB_MODEL", "1")
    at = run_page("attention", {"lang": "en", "model": "no-such-org/no-such-model"})
    assert_clean(at)
    assert at.error and "cannot reach the Hugging Face hub" in at.error[0].value
    assert len(_plots(at)) == 1  # the default model keeps working


@pytest.mark.parametrize("path", ["/tmp", "/etc/passwd", "~/.cache/huggingface", "../../root"])
def test_server_folder_is_refused_in_chinese_without_the_path(monkeypatch, path):
    monkeypatch.delenv("ATTN_ALLOW_LOCAL_MODELS", raising=False)
    at = run_page("attention", {"lang": "zh", "model": path})
    assert_clean(at)
    text = at.error[0].value
    assert "服务器上的文件夹" in text and "bert-base-uncased" in text
    assert path not in text and "/" not in text.replace("Helsinki-NLP/", "")
    assert "all-MiniLM-L6-v2" in at.markdown[0].value and len(_plots(at)) == 1  # the default model instead


def test_model_off_the_allowlist_is_refused_in_chinese(monkeypatch):
    monkeypatch.delenv("ATTN_ALLOW_ANY_HUB_MODEL", raising=False)
    monkeypatch.setattr("viz_core.pretrained.load._hub_listing", lambda *a: pytest.fail("no metadata call for it"))
    at = run_page("attention", {"lang": "zh", "model": "meta-llama/Llama-2-70b-hf"})
    assert_clean(at)
    text = at.error[0].value
    assert "不在此服务器允许的模型列表中" in text and "meta-llama/Llama-2-70b-hf" in text and "gpt2" in text
    assert len(_plots(at)) == 1


def test_operator_secrets_are_read(monkeypatch):
    """The [models] table of secrets.toml reaches the policy: with a one-model allowlist, only it is suggested."""
    monkeypatch.delenv("ATTN_MODEL_ALLOWLIST", raising=False)
    at = AppTest.from_file(APP, default_timeout=APP_TIMEOUT_S)
    at.secrets["models"] = {"allowlist": ["distilgpt2"]}
    at.query_params["lang"] = "en"
    at.query_params["model"] = "gpt2"
    at.run()
    assert_clean(at)
    assert "Choose one of: distilgpt2." in at.error[0].value


@pytest.fixture(scope="module")
def tiny_folders(tmp_path_factory):
    """Tiny random GPT-2 and T5 saved as local folders (safetensors), with the packaged BERT tokenizer."""
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2Model, T5Config, T5Model

    from viz_core.pretrained import default_model_path
    tok = AutoTokenizer.from_pretrained(default_model_path())
    torch.manual_seed(0)
    models = {"gpt2": GPT2Model(GPT2Config(vocab_size=30522, n_embd=32, n_layer=2, n_head=4, n_positions=64)),
              "t5": T5Model(T5Config(vocab_size=30522, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                     decoder_start_token_id=0, pad_token_id=0))}
    paths = {}
    for name, model in models.items():
        path = tmp_path_factory.mktemp(name)
        model.save_pretrained(path, safe_serialization=True)
        tok.save_pretrained(path)
        paths[name] = str(path)
    return paths


@pytest.fixture
def folders_allowed(monkeypatch):
    monkeypatch.setenv("ATTN_ALLOW_LOCAL_MODELS", "1")


def test_decoder_only_model_shows_causal_note(tiny_folders, folders_allowed):
    at = run_page("attention", {"lang": "en", "model": tiny_folders["gpt2"]})
    assert_clean(at)
    assert "decoder-only (causal)" in at.markdown[0].value
    assert any("Causal pattern" in c.value for c in at.caption)
    assert not at.get("text_area")[1:] or "Text B" not in at.text_area[-1].label  # no sentence-pair box


@pytest.mark.parametrize("part", ["encoder", "decoder", "cross"])
def test_encoder_decoder_model_has_three_maps(tiny_folders, folders_allowed, part):
    at = run_page("attention", {"lang": "zh", "model": tiny_folders["t5"], "part": part, "view": "head"})
    assert_clean(at)
    assert widget(at, "radio", "attention.part").value == part
    assert len(at.text_area) == 2  # source text and decoder target text
    assert len(at.get("plotly_chart")) == 1
