"""How well the character model does on what it never read, and on what people type: the numbers a benchmark prints.

    heldout_loss_by_language(lm)      {"en": nats per character, "zh": ...} on the corpus's held-out lines
    prompt_accepted(lm, prompt)       whether the model takes a typed prompt (a "chars_unk" model takes every one)
    sample(lm, prompt)                the prompt and what the model writes after it

    python -m viz_core.lm.heldout [CHECKPOINT_DIR]    prints all three for the shipped (or given) character model
"""
from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from ..errors import InputError
from .charset import never_generated
from .corpus import LANGS, bilingual_prompts, char_corpus
from .generate import generate

CHECKPOINT = "viz_core/checkpoints/lm_chars"


@torch.inference_mode()
def text_loss(model, ids: list[int]) -> float:
    """Mean -log p(x_t | x_<t) in nats over every token of ids after the first, read in windows of max_len tokens
    that overlap by one (so each token is predicted exactly once, from up to max_len - 1 tokens before it)."""
    n = model.cfg.max_len
    total, count = 0.0, 0
    for s in range(0, max(len(ids) - 1, 1), n - 1):
        window = torch.tensor([ids[s: s + n]])  # (1, <=n)
        if window.shape[1] < 2:
            continue
        logits, _ = model(window)  # (1, <=n, V)
        total += F.cross_entropy(logits[0, :-1], window[0, 1:], reduction="sum").item()
        count += window.shape[1] - 1
    return total / max(count, 1)


def heldout_loss_by_language(lm) -> dict[str, float]:
    """{language: nats per character} on the held-out lines of each language (lines the model never trained on):
    those its checkpoint kept (lm.info["heldout"]), else those of viz_core.lm.corpus as it is built today (the
    app's strings change, and the split with them). log(vocab) is the loss of a uniform guess."""
    heldout = lm.info.get("heldout") or char_corpus().heldout
    return {lang: text_loss(lm.model, lm.tokenizer.encode(heldout[lang])) for lang in LANGS}


def prompt_accepted(lm, prompt: str) -> bool:
    """True when the model takes the prompt for generation (lm.encode raises no InputError)."""
    try:
        lm.encode(prompt)
    except InputError:
        return False
    return True


def sample(lm, prompt: str, n_new: int = 40, temperature: float = 0.8, top_p: float = 0.95, seed: int = 0) -> str:
    """The prompt followed by up to n_new generated characters (the page's default settings)."""
    trace = generate(lm.model, lm.encode(prompt), n_new, temperature=temperature, top_p=top_p, seed=seed,
                     never=never_generated(lm.tokenizer))
    return lm.tokenizer.decode(trace.ids)


def report(path: str = CHECKPOINT) -> None:
    """Print the held-out loss per language, the prompts accepted, and six sample generations."""
    from .training import load_lm
    lm = load_lm(path)
    losses = heldout_loss_by_language(lm)
    stats = lm.info.get("corpus", char_corpus().stats)
    print(f"{path}: {lm.info.get('params', 0):,} parameters, vocabulary {lm.tokenizer.size}, "
          f"read {stats['total']['kb']} KB ({stats['total']['lines']} lines)")
    for lang in LANGS:
        print(f"held-out loss {lang}: {losses[lang]:.3f} nats/char "
              f"({stats['heldout'][lang]['chars']:,} held-out characters)")
    prompts = bilingual_prompts()
    ok = [p for _, p in prompts if prompt_accepted(lm, p)]
    print(f"prompts accepted: {len(ok)}/{len(prompts)}")
    for prompt in ("Hello", "I like", "The attention", "你好", "注意力", "我喜欢"):
        print(repr(sample(lm, prompt)))


if __name__ == "__main__":
    report(*sys.argv[1:2])
