"""Why a token is unknown, named from the text it stands for (viz_core.pretrained.result.unknown_causes), on the
numpy path of the packaged model and the transformers path alike."""
import pytest

from viz_core.pretrained.result import unknown_cause, unknown_causes

LONG = "a" * 270
TEXT = f"I love {LONG} and 🦓 and 你好 too."


@pytest.mark.parametrize("piece, cause", [(LONG, "long_word"), ("🦓", "symbol"), ("hi🙂", "symbol"), ("☃", "symbol"),
                                          ("你", "script"), ("ሰላም", "script"), ("a" * 100, "script")])
def test_each_piece_gets_its_cause(piece, cause):
    assert unknown_cause(piece, 100) == cause


def test_causes_are_counted_and_long_words_shortened_in_the_examples():
    c = unknown_causes([LONG, "🦓", "你", "好", "你"], 100)
    assert c.counts == {"long_word": 1, "symbol": 1, "script": 3}
    assert c.examples["script"] == ["你", "好"] and c.examples["long_word"] == ["aaaaaaaaaa…aaaaaaaaaa"]
    assert unknown_cause(LONG, None) == "script"  # a tokenizer without a cap per word


def test_the_packaged_models_numpy_path_names_the_causes():
    from viz_core.pretrained import bert_numpy
    r = bert_numpy.load_default().attention(TEXT, "a ☃")
    assert r.n_unknown == 5 and r.unknown.max_word_chars == 100
    assert r.unknown.counts == {"long_word": 1, "symbol": 2, "script": 2}


def test_the_transformers_path_names_the_same_causes():
    from viz_core.pretrained import bert_numpy, load
    m = load.load_model(None)
    r = load.attention_for(m, TEXT)
    assert r.unknown == bert_numpy.load_default().attention(TEXT).unknown
    assert r.unknown.counts == {"long_word": 1, "symbol": 1, "script": 2}
