"""AppTest of the Language-model page: opens on the shipped induction story, every tab draws, training runs as a
background job and its model replaces the shipped one, bad input shows an error; English and Chinese."""
import json

import numpy as np
import pytest

from app_pages._ui.training_job import shipped_path
from tests.conftest import assert_clean, figure_text, figures, plotly_array, markdowns, run_page, widget
from viz_core.i18n import t as i18n_t
from viz_core.lm.charset import never_generated
from viz_core.lm.generate import generate
from viz_core.lm.training import load_lm

TIMEOUT = 240  # a first run loads torch and two checkpoints on a busy 2-core machine


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small models: one torch thread


def texts(elements) -> str:
    return " ".join(str(e.value) for e in elements)


def open_lm(query: dict):
    return run_page("language_model", query, timeout=TIMEOUT)


def finish_training(at, timeout: float = 120) -> None:
    """Training runs in its own thread: wait for it, then rerun as the fragment would."""
    job = at.session_state["_jobs.lm"]
    assert job.join(timeout), "the training job did not finish"
    at.run()


@pytest.mark.parametrize("lang, title, tab_labels", [
    ("en", "Language model", ["Induction heads", "Your sequence", "Generate text", "KV cache", "Inside the decoder"]),
    ("zh", "语言模型", ["归纳头", "你的序列", "生成文本", "KV 缓存", "解码器内部"]),
])
def test_opens_on_the_shipped_induction_story(lang, title, tab_labels):
    at = open_lm({"lang": lang})
    assert_clean(at)
    assert at.title[0].value == title
    assert [t.label for t in at.tabs] == tab_labels
    assert ("shipped with the app" if lang == "en" else "随应用附带") in texts(at.info)
    specs = figures(at)
    assert len(specs) == 3  # two curve panels, the two head patterns (your sequence: its own tab; the score maps open)
    assert [e.label for e in at.expander][-1] == (
        "Every head's previous-token and induction score at this step (layer × head maps)" if lang == "en"
        else "这一步每个头的前一词元分数与归纳分数（层 × 头热力图）")
    opened = open_lm({"lang": lang, "maps": "1"})
    assert len(figures(opened)) == 5 and sum("colorscale" in d for f in figures(opened) for d in f["data"]) >= 4
    assert any(fig["layout"].get("yaxis", {}).get("autorange") == "reversed" for fig in specs)
    assert not at.error


def _formula_texs(at) -> list[str]:
    """The TeX of every formula element of the page, in page order."""
    from app_pages._ui import formula
    return [json.loads(e.proto.json)["tex"] for e in at.main
            if e.type == "bidi_component" and e.proto.component_name == formula.NAME]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_scores_definitions_are_a_section_drawn_only_while_open(lang):
    """The two scores' formulas and the induction score's two rules (with how they compare with TransformerLens) are
    in a section of their own: closed, the first view has only the architecture's display; open (scores=1, kept in
    the address), the prev(h) display, the rules' text and the two rules."""
    at = open_lm({"lang": lang})
    assert_clean(at)
    assert len(_formula_texs(at)) == 1 and "detect_head" not in "\n".join(markdowns(at))
    label = {"en": "How the two scores are computed: their formulas, and how they compare with TransformerLens",
             "zh": "两个分数怎么算：公式，以及与 TransformerLens 的对比"}[lang]
    assert [e.label for e in at.expander][0] == label
    opened = open_lm({"lang": lang, "scores": "1"})
    assert_clean(opened)
    texs = _formula_texs(opened)
    assert len(texs) == 3 and r"\mathrm{prev}(h)" in texs[1] and r"\mathrm{ind}(h)" in texs[2]
    rules = next(m for m in markdowns(opened) if "detect_head" in m)
    assert ("divides by all N rows" if lang == "en" else "除以全部 N 行") in rules
    assert opened.query_params["scores"] in ("1", ["1"])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_heads_form_when_played(lang):
    """The two head patterns are one figure with a frame per training snapshot (the shipped model's own
    maps and scores), opening on the slider's snapshot, with Play / Pause."""
    at = open_lm({"lang": lang, "snap": "3"})
    assert_clean(at)
    lm = load_lm(shipped_path("lm_induction"))
    snaps = lm.snapshots
    fig = next(f for f in figures(at) if f.get("frames"))
    assert len(fig["frames"]) == len(snaps)
    # one slider of the snapshots, the page's: the figure has none of its own, and its title names the one shown
    assert not fig["layout"].get("sliders") and widget(at, "slider", "language_model.snap").value == 3
    assert fig["layout"]["title"]["text"].endswith(f"{i18n_t('common.colon', lang)}{snaps[3].step}")
    colon = i18n_t("common.colon", lang)
    assert [f["layout"]["title"]["text"].split(colon)[-1] for f in fig["frames"]] == [str(s.step) for s in snaps]
    final = snaps[-1]
    prev = np.unravel_index(np.argmax(final.prev), final.prev.shape)
    ind = np.unravel_index(np.argmax(final.induction), final.induction.shape)
    # the snapshots are stored in 1/255 steps: their bytes are sent, and the browser's k / 255 gives back each float32
    assert fig["layout"]["meta"]["frame_bytes"] == 255
    for frame, snap in zip(fig["frames"], snaps):
        for trace, head in ((0, prev), (1, ind)):
            z = plotly_array(frame["data"][trace]["z"])
            assert z.dtype == np.uint8
            np.testing.assert_array_equal((z / np.float64(255)).astype(np.float32), snap.maps[head])
        assert f"{snap.induction[ind]:.2f}" in frame["layout"]["annotations"][1]["text"]
    assert fig["layout"]["updatemenus"][0]["buttons"][0]["label"] == ("▶ Play" if lang == "en" else "▶ 播放")
    assert fig["layout"]["yaxis"]["autorange"] == "reversed"


def test_your_sequence_tab_draws_the_typed_tokens():
    at = open_lm({"lang": "en", "tab": "sequence", "seq": "5 9 2 7 5 9 2 7"})
    assert_clean(at)
    specs = figures(at)
    assert len(specs) == 3  # the two score maps of this sequence and one head's attention
    attention = specs[-1]
    assert attention["layout"]["xaxis"]["ticktext"] == [f"{i}:{tok}" for i, tok in enumerate("5 9 2 7 5 9 2 7".split())]
    assert "a segment of 4 tokens typed twice" in texts(at.caption)  # the standard rule, offset -(L - 1) = -3
    assert "A[i, i − 3]" in texts(at.caption)
    assert "the rule for any other text would give" in texts(at.caption)  # where the two rules meet: both shown
    assert "TransformerLens" in texts(at.caption) and "divided by all 8 rows rather than the 4 counted" in \
        texts(at.caption)
    best = [m for m in markdowns(at) if "Best induction head" in m]
    assert best and float(best[0].split("score **")[1].rstrip("*.")) >= 0.5


@pytest.mark.parametrize("lang, text, words", [
    ("en", "I went to the park and then I went to the park again.", "Read as words: 9 different words"),
    ("zh", "我今天在图书馆学习注意力机制，明天我还要在图书馆学习注意力机制。", "按词读取：19 个不同的词"),
])
def test_your_sequence_reads_words_and_scores_the_repeated_phrase(lang, text, words):
    at = open_lm({"lang": lang, "tab": "sequence", "seq": text})
    assert_clean(at)
    assert words in texts(at.caption)
    best = [m for m in markdowns(at) if "score **" in m or "分数 **" in m]
    assert best and float(best[0].rsplit("**", 2)[-2]) >= 0.5


def test_make_a_repeated_sequence_button_writes_a_fresh_repeat():
    at = open_lm({"lang": "en", "tab": "sequence", "repeat_len": "12"})
    before = at.text_input(key="language_model.seq").value
    at.button(key="lm.make_repeat").click().run()
    assert_clean(at)
    ids = at.text_input(key="language_model.seq").value.split()
    assert len(ids) == 24 and ids[:12] == ids[12:] and " ".join(ids) != before
    assert "a segment of 12 tokens typed twice" in texts(at.caption)


def test_a_sequence_without_repeats_says_there_is_nothing_to_copy():
    at = open_lm({"lang": "en", "tab": "sequence", "seq": "1 2 3 4 5"})
    assert_clean(at)
    assert "nothing to copy" in " ".join(w.value for w in at.warning)


def test_snapshot_slider_moves_through_training():
    at = open_lm({"lang": "en"})
    at.slider(key="language_model.snap").set_value(0).run()
    assert_clean(at)
    assert "Step 0:" in texts(at.caption)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_generate_tab_draws_each_step(lang):
    at = open_lm({"lang": lang, "tab": "generate", "n_new": "12", "temp": "0.0"})
    assert_clean(at)
    assert at.code[0].value.startswith("The cat ")
    assert len(at.code[0].value) == len("The cat ") + 12
    at.slider(key="language_model.gen_step").set_value(5).run()
    assert_clean(at)
    assert ("step 5" if lang == "en" else "第 5 步") in figure_text(at)
    fig = next(f for f in figures(at) if f.get("frames"))  # every step is a frame, played in the browser
    assert len(fig["frames"]) == 12 and not fig["layout"].get("sliders")  # the page's slider is the one
    assert fig["layout"]["title"]["text"].endswith(i18n_t("common.colon", lang) + "5")
    assert ("step 5" if lang == "en" else "第 5 步") in fig["layout"]["annotations"][0]["text"]
    lm = load_lm(shipped_path("lm_chars"))
    trace = generate(lm.model, lm.encode("The cat "), 12, temperature=0.0, top_p=0.95,
                     never=never_generated(lm.tokenizer))  # the page's settings
    for k, frame in enumerate(fig["frames"]):
        z = plotly_array(frame["data"][2]["z"])  # (L*H, T_max): the new token's row, later keys empty
        t_k = trace.steps[k].attention.shape[-1]
        np.testing.assert_allclose(z[:, :t_k], trace.steps[k].attention.reshape(-1, t_k), atol=1e-6)
        assert np.isnan(z[:, t_k:]).all()


def test_cache_tab_proves_the_cache_exact_for_every_variant():
    at = open_lm({"lang": "en", "tab": "cache", "cache_len": "20"})
    assert_clean(at)
    for kind in ("mha", "gqa", "mqa"):
        widget(at, "radio", "language_model.cache_kv").set_value(kind).run()
        assert_clean(at)
        assert "max |logits with cache − logits recomputed| over 20 positions" in texts(at.success)
    assert "(1, 1, 20, 16)" in str(at.dataframe[0].value)  # MQA: one key/value head, T = 20 tokens cached
    assert "T = 20 tokens in the cache" in texts(at.markdown)  # the slider's T is the table's, the shapes' and bytes'
    growth = next(f for f in figures(at) if "grows linearly" in f["layout"]["title"]["text"])
    assert max(plotly_array(growth["data"][0]["x"])) == 20


def test_training_runs_as_a_job_and_replaces_the_shipped_model_zh():
    at = open_lm({"lang": "zh", "induction_seconds": "5"})
    at.button(key="lm.go_induction").click().run()
    assert_clean(at)
    assert at.session_state["_jobs.lm"] is not None
    marks = " ".join(m for m in markdowns(at) if "-badge[" in m)
    assert "正在训练（实时）" in marks and "你正在查看的模型" in marks  # the live run and the shown model, told apart
    finish_training(at)
    assert_clean(at)
    lm, origin = at.session_state["lm.models"]["induction"]
    assert origin == "trained" and lm.info["steps"] > 0 and lm.history and lm.snapshots
    assert "你训练的模型" in texts(at.info)
    assert "归纳头" in texts(at.success)
    assert not [b for b in at.button if b.key == "lm.live_stop"]  # the live panel (and its Stop) went with the run


def test_closed_settings_are_not_drawn_and_still_decide_the_run():
    """The training settings are drawn only while their fold is open; closed, the address's values hold
    and are the ones the run trains with."""
    at = open_lm({"lang": "en", "induction_seconds": "7", "induction_seed": "3", "induction_kv": "mqa"})
    assert_clean(at)
    assert not [s for s in at.slider if s.label == "Training seconds"] and not at.number_input
    at.button(key="lm.go_induction").click().run()
    job = at.session_state["_jobs.lm"]
    trainer = job.info["run"].trainers[0][1]
    assert (trainer.train_cfg.max_seconds, trainer.train_cfg.seed) == (7.0, 3)
    assert trainer.model_cfg.n_kv_heads == 1  # multi-query: one key/value head
    at.button(key="lm.live_stop").click().run()
    assert job.join(60)
    opened = open_lm({"lang": "en", "induction_seconds": "7", "induction_seed": "3", "induction_set": "1"})
    assert_clean(opened)
    assert widget(opened, "slider", "language_model.induction_seconds").value == 7
    assert widget(opened, "number_input", "language_model.induction_seed").value == 3


def test_stop_button_stops_a_long_run():
    at = open_lm({"lang": "en", "tab": "generate", "chars_seconds": "120"})
    at.button(key="lm.go_chars").click().run()
    job = at.session_state["_jobs.lm"]
    at.button(key="lm.live_stop").click().run()  # the one Stop, in the live panel
    assert job.join(60) and job.status in ("stopped", "done")
    at.run()
    assert_clean(at)
    assert "was stopped" in texts(at.success)


@pytest.mark.parametrize("lang, text, words", [
    ("en", " ".join(f"w{i}" for i in range(70)), "70 different words, but the model has only 64 symbols"),
    ("zh", " ".join(f"w{i}" for i in range(70)), "你的文本有 70 个不同的词"),
    ("en", " ".join(["1"] * 70), "this model reads at most 64"),
])
def test_bad_sequence_shows_an_error_not_an_exception(lang, text, words):
    at = open_lm({"lang": lang, "tab": "sequence"})
    at.text_input(key="language_model.seq").set_value(text).run()
    assert_clean(at)
    assert words in texts(at.error)


def test_any_prompt_is_taken_and_unknown_characters_are_named():
    at = open_lm({"lang": "en", "tab": "generate"})
    at.text_area(key="language_model.prompt").set_value("Zebra 🦓").run()
    assert_clean(at)
    assert not at.error and at.code[0].value.startswith("Zebra \ufffd")
    assert "🦓" in texts(at.info)


def test_a_prompt_of_several_paragraphs_is_taken_and_the_page_says_what_the_model_reads():
    from viz_core.lm.generate import PROMPT_MAX_CHARS
    paragraph = "The cat sat on the mat and looked at the door. " * 8  # 376 characters
    at = open_lm({"lang": "en", "tab": "generate"})
    at.text_area(key="language_model.prompt").set_value(paragraph).run()
    assert_clean(at)
    assert not at.error and at.code[0].value.startswith(paragraph[-88:])  # 128 positions - 40 new characters
    assert "has 376 characters" in texts(at.info) and "reads the last 88 characters" in texts(at.info)
    huge = "a" * (PROMPT_MAX_CHARS + 10)
    at.text_area(key="language_model.prompt").set_value(huge).run()
    assert_clean(at)
    assert not at.error and f"has {PROMPT_MAX_CHARS + 10:,} characters" in texts(at.info)


# ---------------------------------------------------------------- a real decoder in the generate tab
def _installed(d) -> None:
    from viz_core.pretrained import packaged
    if not packaged.installed(d):
        pytest.skip(f"{d.package} is not installed")


@pytest.mark.slow
@pytest.mark.parametrize("lang, licence, rows", [
    ("en", "Gemma is provided under and subject to the Gemma Terms of Use found at ai.google.dev/gemma/terms", "layer"),
    ("zh", "Gemma 依据 Gemma 使用条款（见 ai.google.dev/gemma/terms）提供", "层"),
])
def test_gemma_continues_a_chinese_prompt_step_by_step(lang, licence, rows):
    """The real model picked in the generate tab: its licence and weights noted, the text continued, every step a
    frame (top tokens and each layer's mean attention), equal to viz_core's own generation with the page's settings."""
    from viz_core.pretrained import load_model, packaged
    from viz_core.pretrained.generate import RealGenSettings, generate_real
    _installed(packaged.GEMMA)
    query = {"lang": lang, "tab": "generate", "gen_model": "gemma3-270m", "real_prompt": "我今天在图书馆",
             "n_new": "6", "temp": "0.0"}
    at = open_lm(query)
    assert_clean(at)
    assert not at.error
    notes = texts(at.caption)
    assert licence in notes and "Q4_K_M" in notes and ("16 bits" in notes if lang == "en" else "16 比特" in notes)
    trace = generate_real(load_model("gemma3-270m"), "我今天在图书馆", RealGenSettings(n_new=6, temperature=0.0,
                                                                                   top_p=0.95))
    assert at.code[0].value == trace.text and trace.text.startswith("我今天在图书馆")
    at.slider(key="language_model.gen_step").set_value(3).run(timeout=TIMEOUT)
    assert_clean(at)
    fig = next(f for f in figures(at) if f.get("frames"))
    assert len(fig["frames"]) == len(trace.steps) and not fig["layout"].get("sliders")
    assert fig["layout"]["title"]["text"].endswith(i18n_t("common.colon", lang) + "3")
    assert fig["layout"]["yaxis2"]["title"]["text"] == rows
    for k, frame in enumerate(fig["frames"]):
        z = plotly_array(frame["data"][2]["z"])  # (L, T_max): each layer's mean over its heads, later keys empty
        t_k = trace.steps[k].attention.shape[-1]
        np.testing.assert_allclose(z[:, :t_k], trace.steps[k].attention.mean(axis=1), atol=1e-5)
        assert np.isnan(z[:, t_k:]).all()
    assert ("Its KV cache now holds T = " if lang == "en" else "它的 KV 缓存现在") in texts(at.caption)


@pytest.mark.slow
def test_smollm2_is_picked_like_a_person_would_and_shows_one_layers_heads():
    from viz_core.pretrained import packaged
    _installed(packaged.SMOLLM2)
    at = open_lm({"lang": "en", "tab": "generate", "n_new": "5"})
    widget(at, "radio", "language_model.gen_model").set_value("smollm2-135m").run(timeout=TIMEOUT)
    assert_clean(at)
    assert "Once upon a time, a little robot" in at.code[0].value
    notes = texts(at.caption)
    assert "Q4_1" in notes and "Apache-2.0" in notes and "mostly on English" in notes
    assert "2 × 30 × 3 × 64 × 4 bytes × T" in notes  # the real cache against the formula
    widget(at, "selectbox", "language_model.real_rows").set_value(4).run(timeout=TIMEOUT)
    assert_clean(at)
    fig = next(f for f in figures(at) if f.get("frames"))
    assert fig["layout"]["yaxis2"]["ticktext"] == [f"L4 H{h} → KV{h // 3}" for h in range(9)]
    assert plotly_array(fig["frames"][0]["data"][2]["z"]).shape[0] == 9


@pytest.mark.slow
def test_a_blank_prompt_for_the_real_model_says_what_to_do():
    from viz_core.pretrained import packaged
    _installed(packaged.SMOLLM2)
    at = open_lm({"lang": "zh", "tab": "generate", "gen_model": "smollm2-135m", "n_new": "3"})
    at.text_area(key="language_model.real_prompt").set_value("   ").run(timeout=TIMEOUT)
    assert_clean(at)
    assert "提示词是空的" in texts(at.error)


def test_the_time_per_token_is_measured_in_the_background_and_a_variant_switch_runs_no_model(monkeypatch):
    """The timing chart is a live measurement of the server, taken in a thread of its own and labelled so; switching
    between MHA, GQA and MQA then redraws from what is cached: no timing, no generation, no recomputation."""
    import time

    from app_pages._ui import language_model as cached
    from viz_core.lm import generate as gen
    cached.timings.clear()
    cached.cache_run.clear()
    at = open_lm({"lang": "en", "tab": "cache", "cache_len": "20"})
    assert_clean(at)
    bench = cached.timings()
    assert bench.running or bench.results  # started by the first visit, not measured in its script run
    deadline = time.monotonic() + 120
    while bench.running and time.monotonic() < deadline:
        time.sleep(0.2)
    assert set(bench.results) == {4, 2, 1}
    at.run()
    for kind in ("gqa", "mqa", "mha"):  # each variant's cache run once
        widget(at, "radio", "language_model.cache_kv").set_value(kind).run()
    assert "A live measurement of this server" in texts(at.caption)
    calls = []
    for name in ("time_per_token", "cache_difference", "generate"):
        real = getattr(cached, name)
        monkeypatch.setattr(cached, name, lambda *a, _r=real, _n=name, **k: calls.append(_n) or _r(*a, **k))
    monkeypatch.setattr(gen, "time_per_token", lambda *a, **k: calls.append("time_per_token"))
    for kind in ("gqa", "mqa", "mha"):
        widget(at, "radio", "language_model.cache_kv").set_value(kind).run()
        assert_clean(at)
    assert calls == []


def test_cache_tab_lists_the_real_models_next_to_ours():
    from tests.conftest import md_tables
    from viz_core.pretrained import packaged
    at = open_lm({"lang": "en", "tab": "cache", "cache_len": "20"})
    assert_clean(at)
    table = md_tables(at)[0]
    assert table.iloc[0, 0] == "ours (above)" and table.iloc[0, 5] == f"{2 * 2 * 4 * 16 * 4 * 20:,}"
    shown = dict(zip(table.iloc[:, 0], table.iloc[:, 3]))
    if packaged.installed(packaged.GEMMA):
        assert shown["Gemma 3 270M"] == "36,864"  # 2 x 18 x 1 x 256 x 4 bytes
        assert "sliding-window layers keep only their last 511 tokens" in texts(at.caption)
    if packaged.installed(packaged.SMOLLM2):
        assert shown["SmolLM2 135M Instruct"] == "46,080"  # 2 x 30 x 3 x 64 x 4 bytes


def test_on_a_cpu_server_the_character_model_has_one_size_and_the_page_says_why():
    at = open_lm({"lang": "en", "tab": "generate", "chars_set": "1"})
    assert_clean(at)
    assert not [r for r in at.radio if r.label == "Model size"]
    captions = texts(at.caption)
    assert "This server has no GPU" in captions and "MiB of the 1,024 MiB one run may use" in captions
    assert widget(at, "selectbox", "language_model.chars_batch").options == ["16", "32", "64"]


def test_on_a_gpu_server_the_larger_character_models_train_with_their_heads_shared_as_chosen(fake_gpu):
    at = open_lm({"lang": "zh", "tab": "generate", "chars_set": "1", "chars_size": "large", "chars_kv": "gqa",
                  "chars_seconds": "120"})
    assert_clean(at)
    size = widget(at, "radio", "language_model.chars_size")
    assert size.value == "large" and len(size.options) == 3 and "大（GPU）" in size.options[1]
    assert "128" in widget(at, "selectbox", "language_model.chars_batch").options
    assert "精度：bf16 混合精度" in texts(at.caption)
    at.button(key="lm.go_chars").click().run()
    job = at.session_state["_jobs.lm"]
    trainer = job.info["run"].trainers[0][1]
    at.button(key="lm.live_stop").click().run()
    assert job.join(60)
    assert (trainer.model_cfg.d_model, trainer.model_cfg.n_layers, trainer.model_cfg.n_heads) == (256, 6, 8)
    assert trainer.model_cfg.kv_heads == 4  # GQA: a key/value head per two of the 8 query heads
