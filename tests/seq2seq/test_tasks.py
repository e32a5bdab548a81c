"""Toy tasks: their answers, tokenizers, padding of batches, and the train / held-out split."""
import random

import pytest

from viz_core.errors import InputError
from viz_core import i18n
from viz_core.seq2seq.tasks import (BOS, EOS, PAD, TASKS, RangeNote, Vocab, days_in_month, encode_batch, is_heldout,
                           make_task, sample_batch)


@pytest.mark.parametrize("name,src,tgt", [
    ("copy", "3 1 4", ["3", "1", "4"]),
    ("reverse", "3 1 4 1 5", ["5", "1", "4", "1", "3"]),
    ("sort", "3 1 4 1 5", ["1", "1", "3", "4", "5"]),
    ("addition", "12+34", ["4", "6"]),
    ("addition", "99+1", ["1", "0", "0"]),
    ("date", "2024-03-15", ["1", "5", "Mar", "2", "0", "2", "4"]),
    ("date", "1999-12-05", ["5", "Dec", "1", "9", "9", "9"]),
])
def test_answers(name, src, tgt):
    task = make_task(name)
    assert task.solve(task.tokenize(src)) == tgt


def test_detokenize():
    assert make_task("reverse").detokenize(["5", "1", "3"]) == "5 1 3"
    assert make_task("addition").detokenize(["4", "6"]) == "46"
    assert make_task("date").detokenize(["1", "5", "Mar", "2", "0", "2", "4"]) == "15 Mar 2024"


def test_tokenize_accepts_spaced_or_joined_digits():
    task = make_task("reverse")
    assert task.tokenize("3 1 4") == task.tokenize("314") == task.tokenize("  3  1 4 ") == ["3", "1", "4"]
    assert make_task("addition").tokenize("12 + 34") == ["1", "2", "+", "3", "4"]


@pytest.mark.parametrize("text,code", [("", "train.empty_input"), ("   ", "train.empty_input"),
                                       ("3 x 4", "train.unknown_token"), ("<pad>", "train.unknown_token")])
def test_bad_input_is_an_input_error(text, code):
    with pytest.raises(InputError) as info:
        make_task("reverse").tokenize(text)
    assert info.value.code == code


def test_bad_lengths_and_unknown_task():
    with pytest.raises(InputError, match="min_len"):
        make_task("reverse", min_len=5, max_len=3)
    with pytest.raises(InputError) as info:
        make_task("juggle")
    assert info.value.code == "train.unknown_task"


def test_invalid_date_has_no_answer():
    task = make_task("date")
    assert task.solve(list("2023-02-29")) is None
    assert task.solve(list("2024-02-29")) == ["2", "9", "Feb", "2", "0", "2", "4"]


@pytest.mark.parametrize("name", list(TASKS))
def test_samples_are_correct_and_within_limits(name):
    task = make_task(name)
    rng = random.Random(1)
    for _ in range(200):
        src, tgt = task.sample(rng)
        assert tgt == task.solve(src)
        assert task.min_len <= len(src) <= task.max_src_len if name != "addition" else len(src) <= task.max_src_len
        assert len(tgt) <= task.max_tgt_len
        assert not is_heldout(src)


def test_variable_lengths_are_padded_and_framed_with_bos_eos():
    task = make_task("reverse", min_len=1, max_len=6)
    pairs = [(["3", "1"], ["1", "3"]), (["1", "2", "3", "4"], ["4", "3", "2", "1"])]
    src, tgt_in, tgt_out = encode_batch(task, pairs)
    v = task.src_vocab.stoi
    assert src.tolist() == [[v["3"], v["1"], PAD, PAD], [v["1"], v["2"], v["3"], v["4"]]]
    assert tgt_in[0].tolist() == [BOS, v["1"], v["3"], PAD, PAD]
    assert tgt_out[0].tolist() == [v["1"], v["3"], EOS, PAD, PAD]
    assert tgt_out[1].tolist()[-1] == EOS


def test_heldout_split_is_disjoint_and_stable():
    task = make_task("reverse", min_len=4, max_len=8)
    rng = random.Random(0)
    train = {" ".join(task.sample(rng)[0]) for _ in range(3000)}
    held = {" ".join(task.sample(rng, heldout=True)[0]) for _ in range(300)}
    assert not train & held
    assert all(is_heldout(s.split()) for s in held)
    assert 0.05 < sum(is_heldout(task.random_source(rng)) for _ in range(4000)) / 4000 < 0.15


def test_batch_shapes():
    src, tgt_in, tgt_out = sample_batch(make_task("date"), random.Random(0), 16)
    assert src.shape == (16, 10) and tgt_in.shape == tgt_out.shape and tgt_in.shape[0] == 16


def test_vocab_decode_stops_at_eos():
    vocab = Vocab(["a", "b"])
    assert vocab.decode([BOS, vocab.stoi["a"], vocab.stoi["b"], EOS, vocab.stoi["a"]]) == ["a", "b"]


def test_a_student_may_separate_digits_with_spaces_commas_or_nothing():
    """What people type: spaces, commas (a Chinese keyboard's full-width ones too), full-width digits, no separator."""
    task = make_task("sort")
    for text in ("9 3 7 1", " 9  3 7 1 ", "9,3,7,1", "9, 3, 7, 1", "９，３，７，１", "9、3、7、1", "9371"):
        assert task.tokenize(text) == ["9", "3", "7", "1"], text
    assert make_task("addition").tokenize("１２＋３４") == ["1", "2", "+", "3", "4"]


# ---------------------------------------------------------------- malformed input is refused, with a message
@pytest.mark.parametrize("name, text, code", [
    ("copy", "3 + 4", "train.unknown_token"), ("sort", "a b c", "train.unknown_token"),
    ("reverse", "3 14 1", "train.one_digit"), ("sort", "9 3 7 -1", "train.unknown_token"),
    ("sort", "9;3;x", "train.unknown_token"), ("copy", " , ", "train.empty_input"),
    ("addition", "1+2+3", "train.add_format"), ("addition", "12", "train.add_format"),
    ("addition", "+3", "train.add_format"), ("addition", "3+", "train.add_format"),
    ("addition", "-3+4", "train.add_format"), ("addition", "1.5+2", "train.add_format"),
    ("addition", "12-4", "train.add_format"), ("addition", " ", "train.empty_input"),
    ("date", "20240315", "train.date_format"), ("date", "2024/03/15", "train.date_format"),
    ("date", "24-03-15", "train.date_format"), ("date", "2024-3-15", "train.date_format"),
    ("date", "2023-02-30", "train.date_bad_day"), ("date", "2023-02-29", "train.date_bad_day"),
    ("date", "1900-02-29", "train.date_bad_day"), ("date", "2024-04-31", "train.date_bad_day"),
    ("date", "2024-00-10", "train.date_bad_month"), ("date", "2024-13-01", "train.date_bad_month"),
    ("date", "2024-03-00", "train.date_bad_day"),
])
def test_malformed_input_is_refused(name, text, code):
    with pytest.raises(InputError) as info:
        make_task(name).tokenize(text)
    assert info.value.code == code
    en, zh = (i18n.t(code, lang, **info.value.params) for lang in ("en", "zh"))
    assert en and zh and en != zh


def test_refusal_messages_say_what_to_type():
    with pytest.raises(InputError) as info:
        make_task("date").tokenize("2023-02-30")
    assert i18n.t(info.value.code, "en", **info.value.params) == \
        "2023-02-30 is not a real date: month 2 of 2023 has only 28 days."
    with pytest.raises(InputError) as info:
        make_task("addition").tokenize("1+2+3")
    assert "12+34" in i18n.t(info.value.code, "zh", **info.value.params)


@pytest.mark.parametrize("year, month, days", [(2024, 2, 29), (2023, 2, 28), (1900, 2, 28), (2000, 2, 29),
                                               (2023, 4, 30), (2023, 12, 31)])
def test_days_in_month_agrees_with_the_calendar_module(year, month, days):
    import calendar
    assert days_in_month(year, month) == days == calendar.monthrange(year, month)[1]


# ---------------------------------------------------------------- well-formed input outside the trained range
@pytest.mark.parametrize("name, params, text, note", [
    ("copy", {}, "2", RangeNote("length", 1, 3, 10)),
    ("reverse", {}, "1 2 3 4 5 6 7 8 9 0 1 2", RangeNote("length", 12, 3, 10)),
    ("sort", {"min_len": 5, "max_len": 8}, "3 1 4", RangeNote("length", 3, 5, 8)),
    ("addition", {}, "536+36", RangeNote("digits", 3, 1, 2)),
    ("addition", {"max_len": 3}, "1234+5", RangeNote("digits", 4, 1, 3)),
    ("addition", {}, "05+3", RangeNote("leading_zero", 2, 1, 2)),
    ("date", {}, "2150-01-01", RangeNote("year", 2150, 1900, 2099)),
    ("date", {}, "1066-10-14", RangeNote("year", 1066, 1900, 2099)),
])
def test_outside_the_trained_range_is_answered_with_a_note(name, params, text, note):
    task = make_task(name, **params)
    tokens = task.tokenize(text)
    assert task.solve(tokens) is not None  # well-formed: it has an answer
    assert task.range_note(tokens) == note
    en = i18n.t(f"train.outside_{note.what}", "en", **note.params())
    zh = i18n.t(f"train.outside_{note.what}", "zh", **note.params())
    assert f"{note.lo}–{note.hi}" in en and f"{note.lo}–{note.hi}" in zh


@pytest.mark.parametrize("name, text", [("copy", "3 1 4"), ("reverse", "1 2 3 4 5 6 7 8 9 0"), ("addition", "99+0"),
                                        ("addition", "0+7"), ("date", "1900-01-01"), ("date", "2099-12-31")])
def test_inside_the_trained_range_has_no_note(name, text):
    task = make_task(name)
    assert task.range_note(task.tokenize(text)) is None
