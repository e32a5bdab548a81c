"""Training throughput of our Seq2SeqTransformer against torch.nn.Transformer of the same size, on the same batches.

    python bench/bench_train.py [--steps 60] [--rounds 5] [--batch 128] [--d-model 64] [--threads N] [--device cpu]

Both models: same d_model, heads, layers, d_ff, ReLU, no dropout, sinusoidal positions, pre-norm, the same Adam
and label-smoothed loss, the same pre-generated reverse-task batches and the same masks (source padding, target
padding + causal). Steps of the two models are interleaved in rounds so that load on a shared machine hits both alike.
Prints tokens/s (source + target tokens, pads excluded) of each and the ratio ours / torch.
"""
from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from viz_core.seq2seq.model import ModelConfig, Seq2SeqTransformer, count_parameters, sinusoidal_table  # noqa: E402
from viz_core.seq2seq.tasks import PAD, make_task, sample_batch  # noqa: E402
from viz_core.seq2seq.training import fit_config, label_smoothed_loss, pick_device  # noqa: E402


class TorchSeq2Seq(nn.Module):
    """torch.nn.Transformer with the same embeddings (x sqrt(d)), positions and output layer as ours."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.src_tok = nn.Embedding(cfg.src_vocab, cfg.d_model)
        self.tgt_tok = nn.Embedding(cfg.tgt_vocab, cfg.d_model)
        self.register_buffer("pos", sinusoidal_table(cfg.max_len, cfg.d_model), persistent=False)
        self.core = nn.Transformer(cfg.d_model, cfg.n_heads, cfg.n_enc_layers, cfg.n_dec_layers, cfg.d_ff,
                                   dropout=0.0, batch_first=True, norm_first=cfg.norm == "pre", bias=True)
        self.out = nn.Linear(cfg.d_model, cfg.tgt_vocab, bias=False)

    def forward(self, src, tgt_in):
        scale = math.sqrt(self.cfg.d_model)
        x = self.src_tok(src) * scale + self.pos[: src.shape[1]]  # (B, N_src, d_model)
        y = self.tgt_tok(tgt_in) * scale + self.pos[: tgt_in.shape[1]]  # (B, N_tgt, d_model)
        causal = torch.ones(tgt_in.shape[1], tgt_in.shape[1], dtype=torch.bool, device=src.device).triu(1)
        h = self.core(x, y, tgt_mask=causal, src_key_padding_mask=src == PAD, tgt_key_padding_mask=tgt_in == PAD,
                      memory_key_padding_mask=src == PAD, tgt_is_causal=True)
        return self.out(h), {}


def timed_steps(model, opt, batches, device) -> tuple[float, int]:
    """Train on the batches; return (seconds, tokens)."""
    tokens = 0
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for src, tgt_in, tgt_out in batches:
        logits, _ = model(src, tgt_in)
        loss = label_smoothed_loss(logits, tgt_out, 0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += int((src != PAD).sum() + (tgt_out != PAD).sum())
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, tokens


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60, help="steps per model per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d-ff", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default=None, help="cpu / cuda / mps (default: the best available)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device) if args.device else pick_device()
    task = make_task("reverse")
    cfg = fit_config(task, ModelConfig(d_model=args.d_model, n_heads=args.heads, n_enc_layers=args.layers,
                                       n_dec_layers=args.layers, d_ff=args.d_ff))
    rng = random.Random(0)
    batches = [tuple(torch.from_numpy(a).to(device) for a in sample_batch(task, rng, args.batch))
               for _ in range(args.steps)]
    torch.manual_seed(0)
    models = {"ours": Seq2SeqTransformer(cfg).to(device), "torch.nn.Transformer": TorchSeq2Seq(cfg).to(device)}
    opts = {k: torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9) for k, m in models.items()}
    for k, m in models.items():  # warm-up round (not timed)
        m.train()
        timed_steps(m, opts[k], batches[:5], device)
    totals = {k: [0.0, 0] for k in models}
    for _ in range(args.rounds):
        for k, m in models.items():
            sec, tok = timed_steps(m, opts[k], batches, device)
            totals[k][0] += sec
            totals[k][1] += tok
    print(f"device {device}, threads {torch.get_num_threads()}, batch {args.batch}, d_model {args.d_model}, "
          f"heads {args.heads}, layers {args.layers}+{args.layers}, d_ff {args.d_ff}, "
          f"{args.rounds} rounds x {args.steps} steps per model")
    rates = {}
    for k, (sec, tok) in totals.items():
        rates[k] = tok / sec
        print(f"{k:22s} {count_parameters(models[k]):>9,} params  {rates[k]:>12,.0f} tokens/s  "
              f"{1000 * sec / (args.rounds * args.steps):7.2f} ms/step")
    print(f"ratio ours / torch.nn.Transformer: {rates['ours'] / rates['torch.nn.Transformer']:.3f}")


if __name__ == "__main__":
    main()
