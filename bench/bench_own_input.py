"""What a student types, measured: every "try your own" path of the app on input nobody trained on.

    python bench/bench_own_input.py [--parts induction,prompts,toy,unk] [--trials 20] [--per-length 300]

induction  the shipped induction model (viz_core/checkpoints/lm_induction) on a fresh random segment of L tokens
           typed twice, for every L from 4 to 30: the best head's induction score (standard rule, mean of
           A[i, i - L + 1] over the second copy), mean and worst over --trials sequences; then sentences with a
           repeated phrase (the free-text rule), English and Chinese.
prompts    the shipped character model: the share of 50 bilingual prompts it accepts, and its held-out loss per
           language (nats per character).
toy        the shipped reverse and sort models: held-out exact-sequence accuracy per input length (greedy decoding,
           --per-length inputs each).
unk        the Attention page's default model on a Chinese sentence: how many tokens become [UNK].
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from viz_core import CHECKPOINTS_DIR  # noqa: E402

SENTENCES = [
    "I went to the park and then I went to the park again .",
    "The cat sat on the mat because the cat sat on the mat yesterday .",
    "Attention is all you need , and attention is all you need again",
    "the quick brown fox jumps over the lazy dog and the quick brown fox jumps again",
    "我今天在图书馆学习注意力机制，明天我还要在图书馆学习注意力机制。",
    "老师说注意力很重要，我也说注意力很重要。",
]


def induction(trials: int) -> None:
    from viz_core.lm.induction import repeated_text
    from viz_core.lm.training import load_lm
    lm = load_lm(CHECKPOINTS_DIR / "lm_induction")
    print(f"induction: shipped model ({lm.info.get('steps')} steps), best head per sequence, {trials} fresh "
          "sequences per length (seeds never used in training)")
    print(f"{'L':>3s} {'mean':>6s} {'worst':>6s}  head (layer, head) most often best")
    worst_mean = 1.0
    for length in range(4, 31):
        best, heads = [], []
        for trial in range(trials):
            _, ind = lm.head_scores(repeated_text(length, lm.config.vocab, seed=1_000_000 + 1000 * length + trial))
            best.append(ind.max())
            heads.append(np.unravel_index(np.argmax(ind), ind.shape))
        common = max(set(heads), key=heads.count)
        worst_mean = min(worst_mean, float(np.mean(best)))
        print(f"{length:3d} {np.mean(best):6.2f} {np.min(best):6.2f}  {tuple(int(v) for v in common)}")
    print(f"lowest mean over L = 4..30: {worst_mean:.2f} (goal >= 0.5)")
    for text in SENTENCES:
        prev, ind = lm.head_scores(text)
        print(f"  sentence  induction {ind.max():.2f}  previous-token {prev.max():.2f}  {text}")


def unk(_args) -> None:
    from viz_core.pretrained import catalog
    from viz_core.pretrained.bert_numpy import load_default
    from viz_core.pretrained.policy import ModelPolicy
    model = load_default()
    for text in ("我今天在图书馆学习注意力机制，老师说它很重要。", "The cat sat on the mat.", "注意力 attention"):
        r = model.attention(text)
        share = catalog.unknown_share(r.n_unknown, r.n_text_tokens)
        offered = [e for e in catalog.models_for(text, ModelPolicy())][:3] if catalog.many_unknown(
            r.n_unknown, r.n_text_tokens) else []
        print(f"unk: default model, {r.n_unknown}/{r.n_text_tokens} tokens [UNK] ({share:.0%}), warning "
              f"{'shown' if offered else 'not shown'}"
              f"{', offers ' + ', '.join(f'{e.id} (~{e.size_mb} MB)' for e in offered) if offered else ''}"
              f"  {text}")


def toy(args) -> None:
    from viz_core.seq2seq.training import accuracy_by_length
    for task in ("reverse", "sort"):
        acc = accuracy_by_length(CHECKPOINTS_DIR / task, n_per_length=args.per_length, seed=2024)
        worst = min(acc, key=acc.get)
        print(f"toy: shipped {task}, held-out exact accuracy per input length ({args.per_length} each): "
              + " ".join(f"{n}:{a:.3f}" for n, a in acc.items()) + f"  worst length {worst}: {acc[worst]:.3f}")


def prompts(_args) -> None:
    from viz_core.lm.corpus import bilingual_prompts
    from viz_core.lm.heldout import prompt_accepted, report
    from viz_core.lm.training import load_lm
    report(str(CHECKPOINTS_DIR / "lm_chars"))  # held-out loss per language, prompts accepted, six samples
    lm = load_lm(CHECKPOINTS_DIR / "lm_chars")
    for lang in ("en", "zh"):
        mine = [p for lg, p in bilingual_prompts() if lg == lang]
        print(f"prompts accepted ({lang}): {sum(prompt_accepted(lm, p) for p in mine)}/{len(mine)}")


PARTS = {"induction": induction, "prompts": prompts, "toy": toy, "unk": unk}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of: {', '.join(PARTS)}")
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--per-length", type=int, default=300)
    args = p.parse_args()
    torch.set_num_threads(1)
    for name in args.parts.split(","):
        fn = PARTS[name]
        fn(args.trials) if name == "induction" else fn(args)
        print()


if __name__ == "__main__":
    main()
