"""One training loop for every trainer here (the small encoder-decoder, viz_core.seq2seq.training, and the decoder LM,
viz_core.lm.training): it trains, evaluates, applies every stop rule and yields the record of each logged step. It knows
nothing of a model, a task or a UI (minGPT's trainer: the caller draws what it yields).

    loop = LoopConfig(max_seconds=30, eval_every=50, diverge_above=diverge_limit(vocab))
    hooks = Hooks(train_step=..., evaluate=..., snapshot=..., record=..., stop_requested=...)
    for record in training_loop(trainer, hooks, loop):   # whatever hooks.record returns (Metrics, LMMetrics)
        print(record)

The trainer supplies its counters (Trainee: step, seconds, reason) and its specifics as callables (Hooks).

Stop rules, checked after every training step in this order; the first that holds is the reason (STOP_REASONS):
    nan       the step's loss is NaN or infinite: the weights are lost (no evaluation, no snapshot)
    diverged  after DIVERGE_WARMUP steps the loss's running mean lies above LoopConfig.diverge_above
              (no evaluation, no snapshot)
    stopped   the user asked to stop: answered at once, after the step in progress. No evaluation (the encoder-decoder's
              greedy decoding of its held-out set takes seconds); only the snapshot of the model as it is
    steps     the step budget LoopConfig.max_steps is spent (one last evaluation follows)
    time      the training-time budget LoopConfig.max_seconds is spent (one last evaluation follows)
and after every evaluation of a training step:
    target    the trainer's target holds (Hooks.reached_target); it also replaces steps or time when a budget ran out
              on the evaluation that reached it
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from . import priority
from .step_aside import step_aside
from .threads import thread_budget

STOP_REASONS = ("target", "time", "steps", "stopped", "nan", "diverged")
FAILED = ("nan", "diverged")  # reasons after which the model is not worth an evaluation or a snapshot
DIVERGE_WARMUP = 20  # steps before the divergence rule applies (the first steps' loss may jump)
LOSS_EMA = 0.9       # weight of the past in the loss's running mean: mean = 0.9 mean + 0.1 loss


def diverge_limit(vocab: int) -> float:
    """The divergence threshold of a model that predicts one of `vocab` tokens: 2 ln V + 1, twice the loss of a
    uniform guess (ln V) and a margin. A model that learns stays below ln V; one that averages far above it blew up."""
    return 2 * math.log(vocab) + 1


@dataclass
class LoopConfig:
    """The loop's budgets and rhythm. Defaults: a minute of training, evaluated every 50 steps, no divergence rule."""
    max_seconds: float = 60.0        # training-time budget, evaluation excluded (stop rule "time")
    max_steps: int | None = None     # step budget, None for none (stop rule "steps")
    eval_every: int = 50             # steps between held-out evaluations
    log_every: int = 10              # steps between yielded records (an evaluated or the last step yields too)
    evaluate_first: bool = False     # before the first step: a whole evaluation (True) or a snapshot only (False)
    diverge_above: float = math.inf  # stop rule "diverged": the loss's running mean above this (diverge_limit)
    on_cpu: bool = True              # training on the CPU: give way to a visitor's work before each step, and
                                     # hold to `threads`
    threads: int | None = 1          # torch CPU threads while training on the CPU (None: torch's default)


class Trainee(Protocol):
    """The counters of a trainer that the loop reads, and the stop reason it writes."""
    step: int              # optimiser steps done (the trainer's train step counts them)
    seconds: float         # training time so far, evaluation excluded (the loop takes out the time a step stood
    #                        aside for visitors)
    reason: str | None     # why training stopped (STOP_REASONS); None while it runs


@dataclass
class Hooks:
    """What one trainer does its own way; the loop calls these and nothing else of it."""
    train_step: Callable[[], float]                      # one optimiser step; returns its training loss
    evaluate: Callable[[], None]                         # the held-out evaluation (it takes its snapshot too)
    snapshot: Callable[[], None]                         # attention of the probe as the model is now (cheap)
    record: Callable[[bool], Any]                        # the record to yield; argument: this step evaluated
    stop_requested: Callable[[], bool]                   # whether the user asked to stop
    reached_target: Callable[[], bool] = lambda: False   # asked once after every evaluation of a training step
    evaluation_due: Callable[[], bool] = lambda: False   # an extra reason to evaluate at this step


@dataclass
class StopRules:
    """Every stop rule but the target (see the module doc), in their order; keeps the loss's running mean."""
    cfg: LoopConfig
    mean_loss: float | None = None

    def reason(self, step: int, seconds: float, loss: float, stop_requested: bool) -> str | None:
        """The reason to stop after `step`, whose training loss was `loss`; None to go on."""
        if not math.isfinite(loss):
            return "nan"
        self.mean_loss = loss if self.mean_loss is None else LOSS_EMA * self.mean_loss + (1 - LOSS_EMA) * loss
        if step > DIVERGE_WARMUP and self.mean_loss > self.cfg.diverge_above:
            return "diverged"
        if stop_requested:
            return "stopped"
        if self.cfg.max_steps is not None and step >= self.cfg.max_steps:
            return "steps"
        if seconds >= self.cfg.max_seconds:
            return "time"
        return None


def evaluates(step: int, reason: str | None, cfg: LoopConfig, due: Callable[[], bool]) -> bool:
    """The evaluation rule: every eval_every steps, when the trainer asks (due) and when a budget ends the run;
    never after a failed step (nan, diverged) nor on Stop, which is answered at once."""
    if reason in FAILED or reason == "stopped":
        return False
    return reason is not None or step % cfg.eval_every == 0 or due()


def training_loop(trainer: Trainee, hooks: Hooks, cfg: LoopConfig) -> Iterator[Any]:
    """Train until a stop rule holds; yield hooks.record(evaluated) every log_every steps, after every evaluation
    and at the last step (trainer.reason set). Goes on from trainer.step; yields nothing once trainer.reason is set."""
    threads = cfg.threads if cfg.on_cpu else None
    aside = priority.MAX_WAIT_S if cfg.on_cpu else 0.0  # a visitor's pass on the same cores goes first, even
    #                                                      within a step (viz_core.runtime.step_aside)
    rules = StopRules(cfg)
    if trainer.step == 0 and trainer.reason is None:
        with thread_budget(threads), step_aside(aside, every_op=True):
            (hooks.evaluate if cfg.evaluate_first else hooks.snapshot)()
    while trainer.reason is None:
        if cfg.on_cpu:
            priority.wait_for_foreground()
        with thread_budget(threads):
            with step_aside(aside) as stood:
                loss = hooks.train_step()
            trainer.seconds -= stood.waited  # the time budget and tokens/s count training, not standing aside
            trainer.reason = rules.reason(trainer.step, trainer.seconds, loss, hooks.stop_requested())
            evaluated = evaluates(trainer.step, trainer.reason, cfg, hooks.evaluation_due)
            with step_aside(aside, every_op=True):
                if evaluated:
                    hooks.evaluate()
                    if hooks.reached_target():
                        trainer.reason = "target"  # also when a budget ran out on the evaluation that reached it
                elif trainer.reason == "stopped":
                    hooks.snapshot()
        if evaluated or trainer.step % cfg.log_every == 0 or trainer.reason is not None:
            yield hooks.record(evaluated)
