"""AppTest of the Attention page: every view renders real content, URL state restores it, bad input is a message."""
from __future__ import annotations


import pytest

from streamlit.testing.v1 import AppTest

from tests.conftest import APP, APP_TIMEOUT_S, assert_clean, chart_spec, charts, run_page, widget


def _plots(at):
    return charts(at)


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
    if view == "grid":  # its colour bar says what the colours are
        heat = next(tr for tr in chart_spec(_plots(at)[0])["data"] if tr["type"] == "heatmap")
        assert heat["colorbar"]["title"]["text"] == "权重"
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


ZH_SENTENCE = "我今天在图书馆学习注意力机制，老师说它很重要。"  # Chinese typed on the English default model


@pytest.mark.parametrize("lang, words, offline", [
    ("en", ["17 of 23 tokens are `[UNK]`", "(74 %)", "vocabulary", "all-MiniLM-L6-v2"],
     ["cannot reach the Hugging Face hub", "bert-base-chinese (~410 MB)", "need the network"]),
    ("zh", ["23 个词元中有 17 个是 `[UNK]`", "（74%）", "词表"],
     ["连不上 Hugging Face", "bert-base-chinese（约 410 MB）", "需要联网"])])
def test_chinese_on_the_default_model_warns_and_names_the_models_that_read_it(monkeypatch, lang, words, offline):
    """Offline (the network off, nothing cached): the cause, the count, and the Chinese models that need the network."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = run_page("attention", {"lang": lang, "text": ZH_SENTENCE})
    assert_clean(at)
    assert len(at.warning) == 1 and all(w in at.warning[0].value for w in words)
    captions = " ".join(c.value for c in at.caption)
    assert all(w in captions for w in offline)
    assert not [b for b in at.button if "bert-base-chinese" in b.label]  # no button for a model that cannot load
    assert len(_plots(at)) == 1


def test_picker_lists_models_with_language_kind_and_size(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = run_page("attention", {"lang": "en"})
    picker = widget(at, "selectbox", "attention.model")
    assert picker.value == "" and picker.options[0].startswith("all-MiniLM-L6-v2 · English · encoder")
    assert "bert-base-chinese · Chinese · encoder (BERT) · ~410 MB download, needs the network" in picker.options
    assert any(o.startswith("HuggingFaceTB/SmolLM2-135M · English · decoder (Llama (GQA))") for o in picker.options)
    assert not at.text_input  # the default policy: no free id box
    at = run_page("attention", {"lang": "zh"})
    options = widget(at, "selectbox", "attention.model").options
    assert "bert-base-chinese · 中文 · 编码器 (BERT) · 需联网下载约 410 MB" in options


@pytest.fixture
def cached_chinese_bert(monkeypatch, tmp_path):
    """The network off, and bert-base-chinese in the hub cache (a tiny random one with a Chinese vocabulary)."""
    from huggingface_hub import constants

    from tests.pretrained.tiny_models import fake_hub_cache
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(fake_hub_cache(tmp_path)))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_offered_chinese_model_reads_the_sentence(cached_chinese_bert):
    at = run_page("attention", {"lang": "zh", "text": ZH_SENTENCE})
    assert_clean(at)
    assert "已在此服务器上" in " ".join(c.value for c in at.caption)
    use = [b for b in at.button if b.label == "改用 bert-base-chinese（约 410 MB）"]
    assert len(use) == 1
    use[0].click().run()
    assert_clean(at)
    assert "bert-base-chinese" in at.markdown[0].value and "2 层 × 4 个头" in at.markdown[0].value
    assert widget(at, "selectbox", "attention.model").value == "bert-base-chinese"
    assert not at.warning and not at.info and not at.error  # every character is in its vocabulary
    assert len(_plots(at)) == 1


def test_few_unknown_tokens_are_only_a_note():
    at = run_page("attention", {"lang": "en", "text": "The cat sat on the mat 🙂 today."})
    assert_clean(at)
    assert not at.warning and at.info and "1 of 9 tokens" in at.info[0].value


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_unknown_token_note_names_the_real_cause(lang):
    """A 270-letter English word is [UNK] because of the tokenizer's cap per word, an emoji because the vocabulary
    has no entry for it: neither is a language the model never read."""
    from viz_core.i18n import t
    at = run_page("attention", {"lang": lang, "text": "I love " + "a" * 270 + " and 🦓 so much."})
    assert_clean(at)
    note = " ".join(x.value for x in [*at.info, *at.warning])
    assert "2" in note and "100" in note and "🦓" in note
    cut = {"en": "longer than 100 characters", "zh": "超过 100 个字符"}[lang]
    assert cut in note
    assert {"en": "never read this language", "zh": "没读过这种语言"}[lang] not in note
    assert {"en": "never read this language", "zh": "没读过这种语言"}[lang] in t("attention.unk_cause_script", lang)
    assert "bert-base-chinese" not in note  # no other language's model is offered for a long word or an emoji


def test_free_id_box_when_the_operator_allows_any_id(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ATTN_ALLOW_ANY_HUB_MODEL", "1")
    at = run_page("attention", {"lang": "en"})
    box = at.text_input(key="attention.model_other")
    box.set_value("no-such-org/no-such-model").run()
    assert_clean(at)
    assert widget(at, "selectbox", "attention.model").value == "no-such-org/no-such-model"
    assert at.error and "cannot reach the Hugging Face hub" in at.error[0].value
    assert at.text_input(key="attention.model_other").value == ""  # moved into the picker
    assert len(_plots(at)) == 1  # the default model meanwhile


@pytest.mark.parametrize("words, thinned", [(18, False), (150, True)])
def test_long_input_says_that_labels_are_thinned(words, thinned):
    text = " ".join(["every", "token", "looks", "at", "other", "tokens"] * (words // 6))
    at = run_page("attention", {"lang": "en", "text": text})
    assert_clean(at)
    notes = [c.value for c in at.caption if "Long input" in c.value]
    assert bool(notes) is thinned
    if thinned:
        assert "query axis names one token in 3" in notes[0] and "3·looks" in notes[0]
        yaxis = chart_spec(charts(at)[0])["layout"]["yaxis"]
        assert yaxis["ticktext"][:3] == ["0·[CLS]", "3·looks", "6·token"]


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
    from transformers import GPT2Config, GPT2Model, T5Config, T5Model

    from tests.pretrained.tiny_models import save_with_default_tokenizer
    torch.manual_seed(0)
    models = {"gpt2": GPT2Model(GPT2Config(vocab_size=30522, n_embd=32, n_layer=2, n_head=4, n_positions=64)),
              "t5": T5Model(T5Config(vocab_size=30522, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                     decoder_start_token_id=0, pad_token_id=0))}
    return save_with_default_tokenizer(models, tmp_path_factory.mktemp)


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
    assert len(charts(at)) == 1
