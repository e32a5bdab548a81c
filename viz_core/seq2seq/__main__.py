"""Command line: train the small Transformer on a toy task and save a checkpoint.

    python -m viz_core.seq2seq --task reverse --max-seconds 60 --out DIR

Prints the held-out accuracy while it trains (overall and at the worst input length: training stops once the worst
length reaches --target on 2 evaluations in a row), then why it stopped and the accuracy at every input length on
fresh held-out data; DIR receives model.safetensors + config.json
(+ snapshots.safetensors). Load it back with viz_core.seq2seq.training.load_checkpoint(DIR).translate("3 1 4 1 5").
"""
from __future__ import annotations

import argparse
import sys
import time

from ..errors import InputError
from .model import ModelConfig
from .tasks import TASKS, make_task
from ..runtime.threads import thread_budget
from .checkpoint import DTYPES, save_checkpoint
from .training import TrainConfig, Trainer, worst_length


def _target(text: str) -> float | None:
    return None if text.lower() in ("none", "off", "0") else float(text)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m viz_core.seq2seq", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="reverse", choices=sorted(TASKS))
    p.add_argument("--out", help="checkpoint directory to write (default: write nothing)")
    p.add_argument("--max-seconds", type=float, default=60.0, help="training-time budget (default 60)")
    p.add_argument("--max-steps", type=int, default=None, help="step budget (use it for reproducible runs)")
    p.add_argument("--target", type=_target, default=0.99,
                   help="stop once held-out exact-sequence accuracy at the worst input length reaches this on 2 "
                        "evaluations in a row; 'none' trains the whole budget")
    p.add_argument("--min-len", type=int, default=None, help="shortest source (digits tasks; addition: digits)")
    p.add_argument("--max-len", type=int, default=None, help="longest source (digits tasks; addition: digits)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=TrainConfig.batch_size)
    p.add_argument("--lr-factor", type=float, default=TrainConfig.lr_factor)
    p.add_argument("--warmup", type=int, default=TrainConfig.warmup)
    p.add_argument("--label-smoothing", type=float, default=TrainConfig.label_smoothing)
    p.add_argument("--eval-every", type=int, default=TrainConfig.eval_every)
    p.add_argument("--eval-per-length", type=int, default=TrainConfig.eval_per_length,
                   help="held-out sequences of every input length per evaluation during training")
    p.add_argument("--final-per-length", type=int, default=1000,
                   help="fresh held-out sequences of every input length for the final accuracy table (saved too)")
    p.add_argument("--check-every", type=int, default=TrainConfig.check_every,
                   help="steps between target checks on the training batch (0: evaluate every --eval-every only)")
    p.add_argument("--d-model", type=int, default=ModelConfig.d_model)
    p.add_argument("--heads", type=int, default=ModelConfig.n_heads)
    p.add_argument("--kv-heads", type=int, default=None, help="key/value heads: 1 = MQA, between = GQA")
    p.add_argument("--layers", type=int, default=ModelConfig.n_enc_layers, help="encoder and decoder layers each")
    p.add_argument("--d-ff", type=int, default=ModelConfig.d_ff)
    p.add_argument("--positions", choices=("sinusoidal", "learned"), default=ModelConfig.positions)
    p.add_argument("--norm", choices=("pre", "post"), default=ModelConfig.norm)
    p.add_argument("--no-scale", action="store_true", help="drop the 1/sqrt(d_k) scaling")
    p.add_argument("--dropout", type=float, default=0.0, help="embedding, attention and residual dropout")
    p.add_argument("--tie", action="store_true", help="tie the decoder embedding and the output projection")
    p.add_argument("--cpu", action="store_true", help="train on the CPU even when a GPU is present")
    p.add_argument("--threads", type=int, default=TrainConfig.threads,
                   help="torch CPU threads while training (default 1: fastest for these small models)")
    p.add_argument("--save-dtype", choices=sorted(DTYPES), default="float32", help="dtype of the saved weights")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def configs(args) -> tuple[ModelConfig, TrainConfig]:
    model = ModelConfig(d_model=args.d_model, n_heads=args.heads, n_kv_heads=args.kv_heads,
                        n_enc_layers=args.layers, n_dec_layers=args.layers, d_ff=args.d_ff,
                        positions=args.positions, norm=args.norm, scale=not args.no_scale,
                        emb_dropout=args.dropout, attn_dropout=args.dropout, resid_dropout=args.dropout,
                        tie_weights=args.tie)
    train = TrainConfig(batch_size=args.batch_size, max_seconds=args.max_seconds, max_steps=args.max_steps,
                        target_accuracy=args.target, lr_factor=args.lr_factor, warmup=args.warmup,
                        label_smoothing=args.label_smoothing, eval_every=args.eval_every,
                        eval_per_length=args.eval_per_length,
                        check_every=args.check_every, seed=args.seed,
                        force_cpu=args.cpu, threads=args.threads)
    return model, train


def task_params(args) -> dict:
    params = {}
    if args.min_len is not None:
        params["min_len"] = args.min_len
    if args.max_len is not None:
        params["max_len"] = args.max_len
    return params


def main(argv=None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    try:
        task = make_task(args.task, **task_params(args))
        trainer = Trainer(task, *configs(args))
    except (InputError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    log = (lambda *a: None) if args.quiet else print
    log(f"task {task.name} ({task.min_len}..{task.max_len}), {trainer.n_params:,} parameters, "
        f"device {trainer.device}")
    for m in trainer.run():
        if m.evaluated:
            log(f"step {m.step:5d}  {m.seconds:6.1f} s  loss {m.loss:.3f}  token acc {m.token_acc:.3f}  "
                f"held-out exact {m.val_exact:.3f}  worst length {m.val_worst_len}: {m.val_worst:.3f}  "
                f"{m.tokens_per_s:,.0f} tok/s")
    translator = trainer.translator()
    with thread_budget(args.threads):  # the final greedy evaluations: as fast on one thread, and robust to load
        summary(trainer, translator, start, args.final_per_length)
    if args.out:
        save_checkpoint(translator, args.out, args.save_dtype)
        print(f"saved checkpoint to {args.out}")
    return 1 if trainer.reason in ("nan", "diverged") else 0


FAILED = {"nan": "the loss became NaN: lower --lr-factor or enable clipping",
          "diverged": "the loss diverged: lower --lr-factor or raise --warmup"}


def why_stopped(o: dict) -> str:
    """Trainer.outcome() in words."""
    worst = "" if o["worst"] is None else f"worst length {o['worst_len']}: {100 * o['worst']:.1f} %"
    rule = "" if o["target"] is None else (f"target {100 * o['target']:g} % at the worst input length on "
                                           f"{o['patience']} evaluations in a row")
    if o["reason"] == "target":
        return f"reached the target ({worst}; {rule})"
    if o["reason"] == "stopped":
        return "stopped by you" + (f" ({worst})" if worst else " before the first evaluation")
    if o["reason"] in FAILED:
        return FAILED[o["reason"]]
    budget = "used its time budget" if o["reason"] == "time" else "hit the step limit"
    if o["target"] is None:
        return f"{budget} ({worst}; no target)"
    best = f"best worst length {o['best_worst_len']}: {100 * o['best_worst']:.1f} %"
    missed = (f"; the last {o['hits']} evaluation(s) met it, {o['patience']} in a row are needed"
              if o["hits"] else "")
    return f"{budget} before the target was met ({best}; {rule}{missed})"


def summary(trainer: Trainer, t, start: float, n_per_length: int) -> None:
    """Final figures: why it stopped, and greedy exact accuracy per input length on fresh held-out data."""
    o = trainer.outcome()
    print(f"stopped: {o['reason']} after {trainer.step} steps, {trainer.seconds:.1f} s of training "
          f"({time.perf_counter() - start:.1f} s since start): {why_stopped(o)}")
    if trainer.reason in FAILED:
        print(f"error: {FAILED[trainer.reason]}", file=sys.stderr)
        return
    by_length = t.measure_by_length(n_per_length)
    print(f"held-out exact-sequence accuracy per input length (greedy, {n_per_length} fresh sequences each):")
    print(length_table(by_length))
    n, worst = worst_length(by_length)
    print(f"  worst length {n}: {worst:.4f}   mean over lengths: {sum(by_length.values()) / len(by_length):.4f}")
    print(f"example: {t.task.example!r} -> {t.translate(t.task.example)!r}")


def length_table(by_length: dict[int, float]) -> str:
    """Two aligned rows: input length, exact accuracy."""
    heads = "".join(f"{n:>7d}" for n in by_length)
    values = "".join(f"{v:>7.3f}" for v in by_length.values())
    return f"  length  {heads}\n  exact   {values}"


if __name__ == "__main__":
    sys.exit(main())
