"""Train the decoder-only LM from the command line and save a checkpoint (safetensors + JSON).

    python -m viz_core.lm --task induction --max-seconds 60 --out viz_core/checkpoints/lm_induction
    python -m viz_core.lm --task chars --max-seconds 60 --out viz_core/checkpoints/lm_chars

Exits with 1 when the loss became NaN or diverged (the checkpoint is written all the same).
"""
from __future__ import annotations

import argparse
import sys

from .training import TASKS, LMTrainConfig, LMTrainer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m viz_core.lm", description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=TASKS, default="induction")
    p.add_argument("--max-seconds", type=float, default=60.0, help="training-time budget")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kv-heads", type=int, default=None, help="key/value heads (1 = MQA); default = heads (MHA)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (0 = torch's default)")
    p.add_argument("--cpu", action="store_true", help="train on the CPU even when a GPU is present")
    p.add_argument("--dtype", choices=("float32", "float16"), default="float32", help="weights on disk")
    p.add_argument("--out", required=True, help="checkpoint directory")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = LMTrainConfig(task=args.task, max_seconds=args.max_seconds, max_steps=args.max_steps,
                        batch_size=args.batch_size, lr=args.lr, seed=args.seed, force_cpu=args.cpu,
                        threads=args.threads or None)
    trainer = LMTrainer(cfg)
    if args.kv_heads:
        from .model import LMConfig
        trainer = LMTrainer(cfg, LMConfig.from_dict(trainer.model_cfg.to_dict() | {"n_kv_heads": args.kv_heads}))
    print(f"{args.task}: {trainer.n_params:,} parameters on {trainer.device}", flush=True)
    for m in trainer.run():
        if m.evaluated:
            print(_line(m), flush=True)
    lm = trainer.language_model()
    if args.task == "chars":  # the benchmark's figure, kept with the checkpoint for the page to show
        from .heldout import heldout_loss_by_language
        lm.info["heldout_loss"] = {k: round(v, 4) for k, v in heldout_loss_by_language(lm).items()}
        print("held-out loss per language (nats/char):", lm.info["heldout_loss"], flush=True)
    out = lm.save(args.out, args.dtype)
    print(f"stopped ({trainer.reason}) after {trainer.step} steps, {trainer.seconds:.1f} s; saved to {out}")
    if trainer.reason in FAILED:
        print(f"error: {FAILED[trainer.reason]}", file=sys.stderr)
        return 1
    return 0


FAILED = {"nan": "the loss became NaN: lower --lr", "diverged": "the loss diverged: lower --lr"}


def _line(m) -> str:
    if m.induction is not None:
        return (f"step {m.step:5d}  {m.seconds:6.1f} s  loss unpredictable {m.first_loss:.3f}  in-context "
                f"{m.repeat_loss:.3f}  prev-token {m.prev_token:.2f}  induction {m.induction:.2f}")
    return f"step {m.step:5d}  {m.seconds:6.1f} s  loss {m.loss:.3f}  held-out {m.val_loss:.3f}"


if __name__ == "__main__":
    sys.exit(main())
