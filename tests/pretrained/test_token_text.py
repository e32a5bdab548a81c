"""Readable labels for byte-level BPE tokens (GPT-2, SmolLM2, Qwen): Chinese shows as characters, not mojibake."""
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from viz_core.pretrained.token_text import byte_alphabet, is_byte_level, readable_token, token_labels


def spell(data: bytes) -> str:
    """Bytes as a byte-level tokenizer spells them (the inverse of byte_alphabet)."""
    by_byte = {b: ch for ch, b in byte_alphabet().items()}
    return "".join(by_byte[b] for b in data)


def test_the_alphabet_spells_every_byte_once():
    alphabet = byte_alphabet()
    assert sorted(alphabet.values()) == list(range(256)) and len(alphabet) == 256
    assert all(alphabet[chr(b)] == b for b in range(ord("!"), ord("~") + 1))  # printable ASCII as itself
    assert spell(b" ") == "\u0120" == "Ġ" and spell(b"\n") == "\u010a"  # GPT-2's familiar spellings


def test_readable_token_decodes_whole_characters_and_shows_pieces_in_hex():
    assert spell("我".encode()) == "æĪĳ"  # what a GPT-2 tokenizer shows for 我
    assert readable_token("æĪĳ") == "我"
    assert readable_token(spell(" 你好".encode())) == "Ġ你好"  # a leading space stays visible as Ġ
    piece = "学".encode()  # e5 ad a6: split across two tokens
    assert readable_token(spell(piece[:2])) == "⟨e5 ad⟩" and readable_token(spell(piece[2:])) == "⟨a6⟩"
    assert readable_token("Ġthe") == "Ġthe" and readable_token("<|endoftext|>") == "<|endoftext|>"


def tiny_byte_level_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level BPE over the 256 byte characters plus one merge chain that makes 我 a single token."""
    vocab = {ch: i for i, ch in enumerate(byte_alphabet())}
    vocab |= {"æĪ": 256, "æĪĳ": 257}
    bpe = models.BPE(vocab=vocab, merges=[("æ", "Ī"), ("æĪ", "ĳ")])
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok)


def test_token_labels_of_a_byte_level_tokenizer():
    tok = tiny_byte_level_tokenizer()
    assert is_byte_level(tok)
    ids = tok("我学a")["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["æĪĳ", "å", "Ń", "¦", "a"]  # the raw tokens: mojibake
    assert token_labels(tok, ids) == ["我", "⟨e5⟩", "⟨ad⟩", "⟨a6⟩", "a"]


def test_token_labels_leave_other_tokenizers_alone():
    from transformers import AutoTokenizer

    from viz_core import pretrained
    tok = AutoTokenizer.from_pretrained(pretrained.default_model_path())  # WordPiece (MiniLM)
    assert not is_byte_level(tok)
    ids = tok("我 café naïve")["input_ids"]
    assert token_labels(tok, ids) == tok.convert_ids_to_tokens(ids) and "[CLS]" in token_labels(tok, ids)
