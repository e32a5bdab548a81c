"""Tiny random models built from configs, shared by the unit tests, the AppTests and the browser tests (no downloads).

chinese_bert_folder: a 2-layer BERT whose WordPiece vocabulary holds Chinese characters (safetensors + tokenizer).
fake_hub_cache: the same model laid out as a Hugging Face cache entry, so that an offline server "has" a model from
the picker (bert-base-chinese) the way a download would leave it.
"""
from __future__ import annotations

from pathlib import Path

SENTENCE = "我今天在图书馆学习注意力机制，老师说它很重要。"  # 17 of its 23 tokens are [UNK] for MiniLM
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LATIN = ["the", "cat", "sat", "on", "mat", ".", "，", "。"]


def save_with_default_tokenizer(models: dict, mktemp) -> dict[str, str]:
    """Save each tiny model (name -> transformers model) as a folder (safetensors) with the packaged MiniLM
    tokenizer; mktemp(name) makes each folder (pytest's tmp_path_factory.mktemp). Returns name -> folder."""
    from transformers import AutoTokenizer

    from viz_core.pretrained import default_model_path
    tok = AutoTokenizer.from_pretrained(default_model_path())
    paths = {}
    for name, model in models.items():
        path = mktemp(name)
        model.save_pretrained(path, safe_serialization=True)
        tok.save_pretrained(path)
        paths[name] = str(path)
    return paths


def chinese_tokenizer(folder: Path, chars: str):
    """A BERT WordPiece tokenizer whose vocabulary is the special tokens, a few Latin words and `chars`."""
    from transformers import BertTokenizer

    words = LATIN + sorted(set(chars) - set(LATIN))
    path = Path(folder) / "vocab.txt"
    path.write_text("\n".join(SPECIALS + words) + "\n", encoding="utf-8")
    return BertTokenizer(vocab=str(path), do_lower_case=True, tokenize_chinese_chars=True)  # (transformers 5: vocab=)


def chinese_bert_folder(folder: Path, chars: str = SENTENCE, seed: int = 0) -> Path:
    """Save a tiny random BERT (2 layers, 4 heads, d_model 32) with a Chinese vocabulary into folder."""
    import torch
    from transformers import BertConfig, BertModel

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = chinese_tokenizer(folder, chars)
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64)
    BertModel(cfg).save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    (folder / "vocab.txt").unlink(missing_ok=True)  # the tokenizer lives in tokenizer.json
    return folder


def fake_hub_cache(root: Path, repo_id: str = "bert-base-chinese") -> Path:
    """A hub cache under root holding a tiny Chinese BERT as repo_id (refs/main -> snapshots/<commit>/...)."""
    commit = "0" * 40
    repo = Path(root) / f"models--{repo_id.replace('/', '--')}"
    chinese_bert_folder(repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return Path(root)


if __name__ == "__main__":  # python -m tests.pretrained.tiny_models DIR: a cache for a manual run of the app
    import sys
    print(fake_hub_cache(Path(sys.argv[1])))
