"""Training on the CPU and on a CUDA GPU with the same code, the same models and the same seeds: speed, time to the
goal, peak GPU memory and the final accuracy on both devices, as one table.

    python bench/bench_gpu.py                      # every run on the CPU, then on CUDA when there is one
    python bench/bench_gpu.py --threads 2          # the CPU side with 2 torch threads (a 2-core server)
    python bench/bench_gpu.py --quick              # a smoke run: every run at a few seconds
    python bench/bench_gpu.py --only cuda --xl-seconds 300    # the largest character model for 5 minutes

Runs (name: task, model, goal):
  reverse/small   the Train page's default: reverse, d_model 64, 4 heads, 2+2 layers; to 99 % exact at its worst
                  input length (two held-out evaluations in a row)
  reverse/large   the GPU preset "large": d_model 256, 8 heads, 4+4 layers, d_ff 1024; the same goal
  induction       the Language-model page's induction run (2 layers x 4 heads, attention-only); to its phase change
                  (the in-context loss 1 nat below the loss on unpredictable tokens); it stops at an induction
                  score of 0.6
  chars/base      the shipped character model's size, for a fixed time: steps/s and held-out loss
  chars/xl        the largest GPU size (d_model 512, 8 layers, d_ff 2048), for --xl-seconds on CUDA

Every run has a time cap (training time, evaluations excluded); the defaults keep the whole run under 10 minutes
on a GPU machine. For reverse, a model that reached the goal has its final exact accuracy measured per input length
on the CPU (1000 held-out inputs per length, the same for both devices); the table gives its worst length and the
largest difference between the CPU-trained and the GPU-trained model over all lengths, in points. For the
character models, the held-out loss in nats per character on today's held-out lines of both languages (English and
Chinese averaged), next to the shipped model's on the same lines.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from viz_core.runtime.device import precision  # noqa: E402
from viz_core.lm.corpus import LANGS, char_corpus  # noqa: E402
from viz_core.lm.heldout import text_loss  # noqa: E402
from viz_core.lm.induction import phase_change_step  # noqa: E402
from viz_core.lm.training import LMTrainConfig, LMTrainer, load_lm  # noqa: E402
from viz_core.seq2seq.model import ModelConfig  # noqa: E402
from viz_core.seq2seq.tasks import make_task  # noqa: E402
from viz_core.seq2seq.training import TrainConfig, Trainer, accuracy_by_length  # noqa: E402

SHIPPED_CHARS = Path(__file__).resolve().parents[1] / "viz_core/checkpoints/lm_chars"
SEQ2SEQ = {"small": ModelConfig(d_model=64, n_heads=4, n_enc_layers=2, n_dec_layers=2, d_ff=128),
           "large": ModelConfig(d_model=256, n_heads=8, n_enc_layers=4, n_dec_layers=4, d_ff=1024)}
CAPS = {  # seconds of training per run and device (CPU, CUDA)
    "reverse/small": (90, 60), "reverse/large": (30, 60), "induction": (90, 60), "chars/base": (20, 20),
    "chars/xl": (10, 150),
}
QUICK_CAPS = {name: (3, 3) for name in CAPS}


@dataclass
class Row:
    """One run on one device."""
    run: str
    device: str
    steps: int = 0
    train_s: float = 0.0           # training time (evaluations excluded)
    wall_s: float = 0.0            # the whole run, evaluations included
    goal_s: float | None = None    # training seconds to the goal (None: not reached within the cap)
    goal_step: int | None = None
    peak_mib: float | None = None  # the GPU's peak allocated memory
    result: dict = field(default_factory=dict)  # accuracy per length, held-out loss...

    @property
    def steps_per_s(self) -> float:
        return self.steps / max(self.train_s, 1e-9)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _start(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    _sync(device)
    return time.perf_counter()


def _peak(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2 ** 20 if device.type == "cuda" else None


def reverse_run(size: str, device: torch.device, cap: float, eval_n: int) -> Row:
    """The reverse task to 99 % at its worst length: the Train page's loop (Trainer.run), seed 0."""
    task = make_task("reverse")
    t0 = _start(device)
    trainer = Trainer(task, SEQ2SEQ[size], TrainConfig(max_seconds=cap), device)
    for _ in trainer.run():
        pass
    _sync(device)
    row = Row(f"reverse/{size}", device.type, trainer.step, trainer.seconds, time.perf_counter() - t0,
              peak_mib=_peak(device))
    if trainer.reason == "target":  # the final accuracy, on the CPU, of a model that reached the goal
        row.goal_s, row.goal_step = trainer.seconds, trainer.step
        row.result["by_length"] = accuracy_by_length(trainer.translator(), n_per_length=eval_n)
    else:
        row.result["worst"] = trainer.outcome()["worst"]  # the last held-out evaluation's (100 per length)
    return row


def induction_run(device: torch.device, cap: float) -> Row:
    """The page's induction run until its induction score reaches 0.6 (or the cap); the goal: the phase change."""
    t0 = _start(device)
    trainer = LMTrainer(LMTrainConfig(task="induction", max_seconds=cap, target_induction=0.6), device=device)
    for _ in trainer.run():
        pass
    _sync(device)
    row = Row("induction", device.type, trainer.step, trainer.seconds, time.perf_counter() - t0,
              peak_mib=_peak(device))
    step = phase_change_step(trainer.history)
    if step is not None:
        row.goal_step = step
        row.goal_s = next(r["seconds"] for r in trainer.history if r["step"] >= step)
    row.result["induction"] = max((r.get("induction") or 0.0) for r in trainer.history)
    return row


def heldout_loss(lm) -> float:
    """Nats per character on today's held-out lines, English and Chinese averaged (each model its own tokens)."""
    heldout = char_corpus().heldout
    return float(np.mean([text_loss(lm.model, lm.tokenizer.encode(heldout[lang])) for lang in LANGS]))


def chars_run(size: str, device: torch.device, cap: float, batch: int) -> Row:
    """The character model of `size` for `cap` seconds: steps/s and its held-out loss."""
    t0 = _start(device)
    trainer = LMTrainer(LMTrainConfig(task="chars", size=size, max_seconds=cap, batch_size=batch, eval_every=200),
                        device=device)
    for _ in trainer.run():
        pass
    _sync(device)
    row = Row(f"chars/{size}", device.type, trainer.step, trainer.seconds, time.perf_counter() - t0,
              peak_mib=_peak(device))
    row.result["heldout"] = heldout_loss(trainer.language_model())
    return row


def runs(device: torch.device, caps: dict, args) -> list[Row]:
    i = 1 if device.type == "cuda" else 0
    out = []
    for name in args.runs:
        cap = caps[name][i] if not (name == "chars/xl" and device.type == "cuda" and args.xl_seconds) \
            else args.xl_seconds
        print(f"  {device.type}: {name} (cap {cap} s)...", flush=True)
        if name.startswith("reverse/"):
            out.append(reverse_run(name.split("/")[1], device, cap, args.eval_n))
        elif name == "induction":
            out.append(induction_run(device, cap))
        else:
            size = name.split("/")[1]
            batch = args.batch if device.type == "cuda" else 32 if size == "base" else 8  # xl: 8 fits a CPU run
            out.append(chars_run(size, device, cap, batch))
        r = out[-1]
        print(f"    {r.steps} steps in {r.train_s:.1f} s ({r.steps_per_s:.1f}/s), goal "
              f"{'-' if r.goal_s is None else f'{r.goal_s:.1f} s'}, {r.result if 'by_length' not in r.result else ''}",
              flush=True)
    return out


def _fmt(x, spec: str, none: str = "-") -> str:
    return none if x is None else format(x, spec)


def print_table(rows: list[Row], shipped: float | None) -> None:
    by = {(r.run, r.device): r for r in rows}
    print("\n| run | device | precision | steps/s | speed-up | to the goal (s) | goal step | peak GPU MiB | result |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cpu = by.get((r.run, "cpu"))
        speed = f"{r.steps_per_s / cpu.steps_per_s:.1f}x" if r.device == "cuda" and cpu else ""
        if "by_length" in r.result:
            acc = r.result["by_length"]
            worst = min(acc, key=acc.get)
            result = f"worst length {worst}: {100 * acc[worst]:.1f} %"
            if r.device == "cuda" and cpu:
                diff = max(abs(acc[n] - cpu.result["by_length"][n]) for n in acc)
                result += f"; max |CUDA - CPU| over lengths {100 * diff:.1f} pt"
        elif "heldout" in r.result:
            result = f"held-out {r.result['heldout']:.3f} nats/char"
            if shipped is not None:
                result += f" ({r.result['heldout'] - shipped:+.3f} vs shipped)"
        elif "worst" in r.result:
            result = f"goal not reached: worst length at {100 * (r.result['worst'] or 0):.0f} %"
        else:
            result = f"best induction score {r.result.get('induction', 0):.2f}"
        goal = _fmt(r.goal_s, ".1f", "-" if r.run.startswith("chars/") else "not reached")  # chars: no goal
        print(f"| {r.run} | {r.device} | {precision(r.device)} | {r.steps_per_s:.1f} | {speed} | {goal} | "
              f"{_fmt(r.goal_step, 'd')} | {_fmt(r.peak_mib, '.0f')} | {result} |")
    if shipped is not None:
        print(f"\nshipped character model: held-out {shipped:.3f} nats/char on the same lines")
    for name in sorted({r.run for r in rows}):
        cpu, gpu = by.get((name, "cpu")), by.get((name, "cuda"))
        if cpu and gpu and cpu.goal_s and gpu.goal_s:
            print(f"{name}: to the goal {cpu.goal_s:.1f} s on the CPU, {gpu.goal_s:.1f} s on CUDA "
                  f"({cpu.goal_s / gpu.goal_s:.1f}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=("cpu", "cuda"), help="one device only")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads of the CPU runs (the app's: 1)")
    ap.add_argument("--runs", nargs="+", default=list(CAPS), choices=list(CAPS))
    ap.add_argument("--quick", action="store_true", help="every run capped at 3 s (a smoke run)")
    ap.add_argument("--xl-seconds", type=float, default=None, help="training seconds of chars/xl on CUDA")
    ap.add_argument("--batch", type=int, default=64, help="batch of the character models on CUDA")
    ap.add_argument("--eval-n", type=int, default=1000, help="held-out inputs per length for reverse's accuracy")
    args = ap.parse_args()
    caps = QUICK_CAPS if args.quick else CAPS
    if args.quick:
        args.eval_n = min(args.eval_n, 100)
    torch.set_num_threads(args.threads)
    devices = [] if args.only == "cuda" else [torch.device("cpu")]
    if args.only != "cpu":
        if torch.cuda.is_available():
            devices.append(torch.device("cuda"))
            print(f"CUDA: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
                  f"bf16 {torch.cuda.is_bf16_supported()}")
        else:
            print("CUDA: not available on this machine; CPU runs only")
    print(f"CPU runs with {args.threads} torch thread(s)", flush=True)
    t0 = time.perf_counter()
    rows = [r for d in devices for r in runs(d, caps, args)]
    shipped = None
    if any(r.run.startswith("chars/") for r in rows):
        torch.set_num_threads(max(args.threads, 1))
        shipped = heldout_loss(load_lm(SHIPPED_CHARS))
    print_table(rows, shipped)
    print(f"\nwhole run: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
