"""The character model on what a student types: the bilingual corpus (ours, deterministic, held out per language),
a vocabulary that accepts every prompt (unknown characters -> UNK), sampling settings that never give NaN, the
benchmark's functions, the shipped checkpoint, and the generate tab with a typed Chinese prompt."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import viz_core
from viz_core.errors import InputError
from viz_core.lm import DecoderLM, LMConfig
from viz_core.lm.charset import ASCII, UNK, unknown_chars, vocabulary
from viz_core.lm.corpus import LANGS, bilingual_prompts, char_corpus, clean, explanation_lines
from viz_core.lm.generate import generate, sampling_probs
from viz_core.lm.heldout import heldout_loss_by_language, prompt_accepted, sample, text_loss
from viz_core.lm.sentences import sentence_pairs
from viz_core.lm.training import LanguageModel, LMTrainConfig, Tokenizer, load_lm

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def shipped():
    return load_lm(viz_core.CHECKPOINTS_DIR / "lm_chars")


# ---------------------------------------------------------------- corpus
def test_corpus_is_deterministic_and_held_out_lines_are_never_trained_on():
    c = char_corpus()
    assert char_corpus.__wrapped__() == c  # built again from scratch: the same text
    assert char_corpus(200, seed=1).train != char_corpus(200, seed=0).train
    train = set(c.train.splitlines())
    for lang in LANGS:
        held = c.heldout[lang].splitlines()
        assert len(held) > 100 and not train & set(held)
        assert c.stats["heldout"][lang]["lines"] == len(held)
    assert all(CJK.search(line) for line in c.heldout["zh"].splitlines()[:50] if not line.isascii())


def test_corpus_reads_both_sources_in_both_languages():
    parts = char_corpus().stats["parts"]
    for lang in LANGS:
        assert parts[f"{lang}_explanations"]["chars"] > 20_000  # the app's own text
        assert parts[f"{lang}_generated"]["lines"] > 3_000
    total = char_corpus().stats["total"]
    assert total["chars"] == sum(p["chars"] for p in parts.values()) + len(parts) - 1  # joined by newlines
    assert 250 < total["kb"] < 1000


def test_explanations_are_cleaned_of_markup():
    assert clean("**Bold** and *i* `code`: $d_k$ is {n} steps, $\\sqrt{d_k}$ [a link](https://x.org) :blue[x]") \
        == ["Bold and i code: d_k is 3 steps, a link x"]
    assert clean("T < 1 sharpens, a * b, [PAD] and <bos>") == ["T < 1 sharpens, a * b, [PAD] and <bos>"]
    assert clean("- first\n\n## Title") == ["first", "Title"]
    for lang in LANGS:
        text = "\n".join(explanation_lines(lang))
        assert not re.search(r"\*\*|\$|`|\{[a-z_]+\}|\\frac", text)
    assert any("注意力" in line for line in explanation_lines("zh"))
    assert any("attention" in line for line in explanation_lines("en"))


def test_generated_sentences_pair_an_english_and_a_chinese_sentence():
    pairs = sentence_pairs(300, seed=5)
    assert pairs == sentence_pairs(300, seed=5)
    for en, zh in pairs:
        assert (en[0].isupper() or en[0].isdigit()) and en.isascii() and en[-1] in ".!?"
        assert CJK.search(zh) and zh[-1] in "。！？"


def test_fifty_prompts_of_both_languages():
    prompts = bilingual_prompts()
    assert len(prompts) == 50 and len(set(p for _, p in prompts)) == 50
    assert [lang for lang, _ in prompts].count("en") == 25
    assert all(p.isascii() for lang, p in prompts if lang == "en")
    assert all(CJK.search(p) for lang, p in prompts if lang == "zh")
    assert all(ord(c) < 0x1F000 for _, p in prompts for c in p)  # no emoji
    assert any(any(c.isdigit() for c in p) for _, p in prompts) and any("？" in p or "?" in p for _, p in prompts)


# ---------------------------------------------------------------- vocabulary
def test_vocabulary_holds_ascii_newline_the_corpus_and_unk_last():
    itos = vocabulary("你好你好啊 ∑∑")
    assert itos[0] == "\n" and itos[-1] == UNK and len(set(itos)) == len(itos)
    assert set(ASCII) <= set(itos) and len(ASCII) == 95
    assert "你" in itos and "好" in itos and "∑" in itos and "啊" not in itos  # used once: UNK
    assert unknown_chars("a啊🙂啊", set(itos)) == ["啊", "🙂"]


def test_unknown_characters_become_unk_and_round_trip():
    tok = Tokenizer.for_task(LMTrainConfig(task="chars"))
    assert tok.kind == "chars_unk"
    text = "Hello 你好, I like 🙂 and 龘!"
    ids = tok.encode(text)
    assert len(ids) == len(text) and ids.count(tok.size - 1) == 2
    assert tok.decode(ids) == text.replace("🙂", UNK).replace("龘", UNK)
    assert tok.unknown(text) == ["🙂", "龘"] and tok.unknown("Hello 你好") == []
    with pytest.raises(InputError):
        tok.encode("   ")


def test_the_first_tokenizer_still_refuses_but_its_list_says_how_many_more():
    itos = ["\n", " ", "."] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("一二三四五六七八九十百千万上下左右前后中")
    old = Tokenizer("chars", itos)  # 49 tokens, no capitals: "Hello" is refused
    with pytest.raises(InputError) as err:
        old.encode("Hello")
    assert err.value.params["hint"] == "".join(itos[1:40]) + "… (9 more)"
    assert old.unknown("Hello") == []  # it refuses instead of replacing


# ---------------------------------------------------------------- sampling, against hand-computed probabilities
Z = torch.log(torch.tensor([4.0, 2.0, 1.0, 1.0]))  # softmax: 1/2, 1/4, 1/8, 1/8


@pytest.mark.parametrize("kwargs, expected", [
    (dict(temperature=1.0), [0.5, 0.25, 0.125, 0.125]),
    (dict(temperature=1.0, top_k=2), [2 / 3, 1 / 3, 0, 0]),
    (dict(temperature=1.0, top_k=3), [0.5, 0.25, 0.125, 0.125]),  # a tie at the k-th value keeps both
    (dict(temperature=1.0, top_p=0.6), [2 / 3, 1 / 3, 0, 0]),      # 0.5 < 0.6: the second token is needed
    (dict(temperature=1.0, top_p=0.5), [1, 0, 0, 0]),               # the first alone reaches 0.5
    (dict(temperature=1.0, top_p=1e-9), [1, 0, 0, 0]),              # the most likely token always stays
    (dict(temperature=2.0), [x / (4 + 2 ** 0.5) for x in (2, 2 ** 0.5, 1, 1)]),  # p ~ (e^z)^(1/2)
    (dict(temperature=0.0), [1, 0, 0, 0]),                          # greedy
    (dict(temperature=1e-30), [1, 0, 0, 0]),                        # tiny T: no overflow, no NaN
])
def test_sampling_probs_by_hand(kwargs, expected):
    p = sampling_probs(Z, **kwargs)
    torch.testing.assert_close(p, torch.tensor(expected, dtype=torch.float32), atol=1e-6, rtol=0)


@pytest.mark.parametrize("kwargs", [dict(top_p=0.0), dict(top_p=-0.5), dict(top_p=1.5), dict(top_k=-1),
                                    dict(temperature=-1.0), dict(temperature=float("nan"))])
def test_settings_that_define_no_distribution_are_refused(kwargs):
    settings = dict(temperature=1.0, top_k=0, top_p=1.0) | kwargs
    with pytest.raises(ValueError):
        sampling_probs(Z, **settings)
    model = DecoderLM(LMConfig(vocab=6, max_len=8)).eval()
    with pytest.raises(ValueError):  # refused before anything reaches torch.multinomial
        generate(model, [1, 2], 3, **settings)


def test_nan_and_infinite_logits_are_refused_but_minus_infinity_masks_a_token():
    for bad in ([0.0, float("nan")], [0.0, float("inf")], [float("-inf")] * 2):
        with pytest.raises(ValueError):
            sampling_probs(torch.tensor(bad))
    masked = torch.tensor([float("-inf"), *Z[1:].tolist()])  # 1/4, 1/8, 1/8 left: renormalised to 1/2, 1/4, 1/4
    torch.testing.assert_close(sampling_probs(masked), torch.tensor([0.0, 0.5, 0.25, 0.25]))


def test_a_never_token_is_never_drawn_but_its_probability_is_still_shown():
    torch.manual_seed(0)
    model = DecoderLM(LMConfig(vocab=5, d_ff=8, max_len=40)).eval()
    free = generate(model, [1, 2], 30, temperature=0.0)
    top = free.steps[0].token
    banned = generate(model, [1, 2], 30, temperature=0.0, never=(top,))
    assert top not in [s.token for s in banned.steps]
    assert banned.steps[0].token == int(np.argsort(-free.steps[0].probs)[1])  # greedy takes the runner-up
    assert banned.steps[0].probs[top] == pytest.approx(free.steps[0].probs[top])  # the model's own distribution
    sampled = generate(model, [1, 2], 30, temperature=2.0, seed=1, never=(top, 0))
    assert not {top, 0} & {s.token for s in sampled.steps}
    assert all(s.sampled[top] == 0 for s in sampled.steps)


# ---------------------------------------------------------------- the benchmark's functions
def test_text_loss_predicts_each_token_once_from_its_window():
    torch.manual_seed(0)
    model = DecoderLM(LMConfig(vocab=9, d_ff=16, max_len=5)).eval()
    ids = torch.randint(0, 9, (12,)).tolist()
    # windows of 5 overlapping by one: [0..4] [4..8] [8..11]; every token after the first is a target once
    total, count = 0.0, 0
    with torch.no_grad():
        for s in (0, 4, 8):
            w = torch.tensor([ids[s: s + 5]])
            total += F.cross_entropy(model(w)[0][0, :-1], w[0, 1:], reduction="sum").item()
            count += w.shape[1] - 1
    assert count == 11
    assert text_loss(model, ids) == pytest.approx(total / count, rel=1e-6)


def test_prompt_accepted_tells_a_refusing_model_from_an_accepting_one():
    model = DecoderLM(LMConfig(vocab=4, max_len=8))
    old = LanguageModel(model, Tokenizer("chars", ["\n", " ", "a", "b"]), LMTrainConfig(task="chars"))
    new = LanguageModel(model, Tokenizer("chars_unk", ["\n", " ", "a", UNK]), LMTrainConfig(task="chars"))
    assert prompt_accepted(old, "ab") and not prompt_accepted(old, "你好")
    assert prompt_accepted(new, "你好") and prompt_accepted(new, "Hello 🙂")
    assert not prompt_accepted(new, "") and not prompt_accepted(new, "a" * 9)  # empty; longer than max_len


# ---------------------------------------------------------------- the shipped checkpoint
def test_shipped_model_accepts_all_fifty_prompts(shipped):
    assert shipped.tokenizer.kind == "chars_unk"
    assert all(prompt_accepted(shipped, p) for _, p in bilingual_prompts())


def test_shipped_model_beats_a_uniform_guess_on_held_out_text_of_each_language(shipped):
    losses = heldout_loss_by_language(shipped)
    assert set(losses) == {"en", "zh"}
    for lang in LANGS:
        assert 0 < losses[lang] < 0.6 * math.log(shipped.tokenizer.size)
    assert shipped.info["heldout_loss"]["en"] == pytest.approx(losses["en"], abs=1e-3)  # as the checkpoint says
    stats, held = shipped.info["corpus"], shipped.info["heldout"]  # what it read, the lines it never trained on
    assert stats["sources"] == char_corpus().stats["sources"]
    for lang in LANGS:
        assert len(held[lang]) == stats["heldout"][lang]["chars"] + 1  # + the final newline


@pytest.mark.parametrize("prompt, lang", [("Hello", "en"), ("I like", "en"), ("The attention", "en"),
                                          ("你好", "zh"), ("注意力", "zh"), ("我喜欢", "zh")])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shipped_model_continues_in_the_prompts_language(shipped, prompt, lang, seed):
    """The rest of the prompt's line is in its language (or the line simply ends); a new line may switch, as the
    corpus's lines do."""
    text = sample(shipped, prompt, n_new=30, seed=seed)
    new = text[len(prompt):]
    assert text.startswith(prompt) and len(new) == 30 and UNK not in new  # it never writes the unknown token
    line = new.split("\n")[0]
    letters = [c for c in line if c.isalpha()]
    if not letters:
        assert line.strip() in ("", ".", "!", "?", "。", "！", "？"), text  # the sentence just ended
        return
    share_cjk = np.mean([bool(CJK.match(c)) for c in letters])
    assert (share_cjk > 0.6 if lang == "zh" else share_cjk == 0), text
    if lang == "en":  # real words (of the corpus), not a soup of letters
        words = re.findall(r"[a-z]+", line.lower())
        known = set(re.findall(r"[a-z]+", char_corpus().train.lower()))
        assert np.mean([w in known for w in words]) >= 0.6, text


# ---------------------------------------------------------------- the generate tab (AppTest)
@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_generate_tab_takes_a_typed_chinese_prompt(lang):
    from tests.conftest import assert_clean, run_page
    at = run_page("language_model", {"lang": lang, "tab": "generate", "n_new": "20"}, timeout=240)
    at.text_area(key="language_model.prompt").set_value("你好").run()
    assert_clean(at)
    assert not at.error
    out = at.code[0].value
    assert out.startswith("你好") and len(out) == 2 + 20
    at.text_area(key="language_model.prompt").set_value("你好🙂**x**").run()
    assert_clean(at)
    note = " ".join(str(e.value) for e in at.info)
    assert "🙂" in note and ("unknown token" in note if lang == "en" else "未知词元" in note)
    assert at.code[0].value.startswith("你好" + UNK + "**x**")
    read = " ".join(str(e.value) for e in at.caption)
    assert ("explanations" if lang == "en" else "讲解") in read and "KB" in read


# ---------------------------------------------------------------- a model trained here (the page's live run)
def test_a_trained_character_model_records_what_it_read_and_round_trips(tmp_path):
    from viz_core.lm.training import LMTrainer
    cfg = LMTrainConfig(task="chars", max_steps=3, max_seconds=1e9, eval_every=3, context=32, batch_size=4,
                        force_cpu=True)
    lm = LMTrainer(cfg).language_model()
    assert lm.info["corpus"] == char_corpus().stats and lm.info["heldout"] == char_corpus().heldout
    lm.save(tmp_path, "float16")
    back = load_lm(tmp_path)
    assert back.tokenizer == lm.tokenizer and back.tokenizer.kind == "chars_unk"
    assert back.tokenizer.decode(back.encode("你好🙂")) == "你好" + UNK
    assert back.info["heldout"] == lm.info["heldout"]
