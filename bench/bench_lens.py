"""How long the logit lens takes: our own two models on the Language model page, and randomly initialised
decoders with the shapes of GPT-2 small and SmolLM2-135M (the page reads at most LENS_MAX_TOKENS = 64 tokens; each
row is one N x V product with the vocabulary, so the vocabulary and the depth set the cost).

    python bench/bench_lens.py [--repeats 5]

Prints the median seconds per lens. No network: the Hugging Face shapes are built from configs (random weights cost
the same as trained ones).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from viz_core.lm.lens import logit_lens  # noqa: E402
from viz_core.lm.training import load_lm  # noqa: E402
from viz_core.pretrained.lens import final_norm, lens_from_readout  # noqa: E402

CHECKPOINTS = Path(__file__).resolve().parents[1] / "viz_core" / "checkpoints"


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def hf_lens(causal, n_tokens: int):
    """The same computation as viz_core.pretrained.lens.logit_lens_for, without a tokenizer."""
    base, head = causal.base_model, causal.get_output_embeddings()
    norm = final_norm(base)
    ids = list(range(100, 100 + n_tokens))

    def run():
        with torch.inference_mode():
            out = base(input_ids=torch.tensor([ids]), output_hidden_states=True, return_dict=True)
            hidden = list(out.hidden_states[:-1]) + [out.last_hidden_state]
            last = len(hidden) - 1
            return lens_from_readout(lambda r: head(hidden[r][0] if r == last else norm(hidden[r][0])), len(hidden),
                                     ids, [str(i) for i in ids], lambda some: [str(i) for i in some])
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    print(f"torch threads: {torch.get_num_threads()}")
    chars, induction = load_lm(CHECKPOINTS / "lm_chars"), load_lm(CHECKPOINTS / "lm_induction")
    text = ("The cat sleeps in the library. 猫在图书馆睡觉。" * 4)[:128]
    print(f"character model, 128 characters: {median_seconds(lambda: logit_lens(chars, text), args.repeats):.4f} s")
    seq = " ".join(str(i % 60) for i in range(32))
    print(f"induction model, 32 tokens: {median_seconds(lambda: logit_lens(induction, seq), args.repeats):.4f} s")
    torch.manual_seed(0)
    shapes = {"GPT-2 small shape (12 layers, V 50257)": GPT2LMHeadModel(GPT2Config()),
              "SmolLM2-135M shape (30 layers, GQA 9/3, V 49152)": LlamaForCausalLM(LlamaConfig(
                  vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                  num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True))}
    for name, model in shapes.items():
        model.eval()
        for n in (16, 64):
            print(f"{name}, {n} tokens: {median_seconds(hf_lens(model, n), args.repeats):.3f} s")


if __name__ == "__main__":
    main()
