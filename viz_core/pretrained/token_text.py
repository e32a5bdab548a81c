"""Readable token labels for byte-level BPE tokenizers (GPT-2, SmolLM2, Qwen, Llama 3).

Those tokenizers work on UTF-8 bytes and spell each byte as one printable character: the printable Latin-1 bytes
as themselves, the other 68 (control bytes, space, ...) as the characters U+0100 onwards, in byte order. A Chinese
character is three bytes, so its tokens read as mojibake ("æĪĳ" for 我). readable_tokens maps such a token back to
its bytes: a token that is whole UTF-8 text shows that text (a leading space as "Ġ", as for English tokens), a piece
of a character shows its bytes in hex ("⟨e6 88⟩"). ASCII tokens ("Ġthe") and the tokens of other tokenizers
(WordPiece "##ing", SentencePiece "▁的") are left as they are.
"""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def byte_alphabet() -> dict[str, int]:
    """The byte-level alphabet: character -> the byte it spells (256 entries)."""
    shown = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    spelled, extra = {}, 0
    for byte in range(256):
        if byte in shown:
            spelled[chr(byte)] = byte
        else:
            spelled[chr(256 + extra)] = byte
            extra += 1
    return spelled


def readable_token(token: str) -> str:
    """One token's label (module docstring)."""
    alphabet = byte_alphabet()
    if not token or any(ch not in alphabet for ch in token):
        return token  # not a byte-level token (or a special token such as <|endoftext|>)
    data = bytes(alphabet[ch] for ch in token)
    if data.isascii():
        return token
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "⟨" + " ".join(f"{b:02x}" for b in data) + "⟩"
    return "Ġ" + text[1:] if text.startswith(" ") else text


def is_byte_level(tokenizer) -> bool:
    """True for a fast tokenizer whose decoder is byte-level BPE (the only kind whose tokens need readable_token)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return backend is not None and "ByteLevel" in repr(backend.decoder)


def token_labels(tokenizer, ids) -> list[str]:
    """The tokens of ids as labels: tokenizer.convert_ids_to_tokens, made readable for byte-level BPE."""
    tokens = tokenizer.convert_ids_to_tokens([int(i) for i in ids])
    return [readable_token(t) for t in tokens] if is_byte_level(tokenizer) else tokens
