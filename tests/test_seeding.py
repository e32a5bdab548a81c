"""Seeded results do not depend on what other threads (other visitors' sessions) draw meanwhile (viz_core.runtime.seeding)."""
import ast
import threading
from pathlib import Path

import pytest
import torch

from viz_core.lessons import anatomy, mechanics
from viz_core.runtime import seeding
from viz_core.lm.training import LMTrainConfig, LMTrainer
from viz_core.seq2seq.model import ModelConfig
from viz_core.seq2seq.tasks import make_task
from viz_core.seq2seq.training import TrainConfig, Trainer

ROOT = Path(__file__).resolve().parents[1]
TINY_LM = anatomy.TinyLMConfig(seed=0)


def _weights(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


class _Meanwhile:
    """Runs `work` in a loop on another thread for the duration of a with-block (another visitor's session)."""

    def __init__(self, work):
        self.work, self.stop, self.runs = work, threading.Event(), 0

    def _loop(self):
        while not self.stop.is_set():
            self.work()
            self.runs += 1

    def __enter__(self):
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)


def test_a_seeded_build_is_the_same_while_another_thread_draws():
    alone = _weights(anatomy.TinyLM(TINY_LM))
    differ = 0
    with _Meanwhile(lambda: mechanics.shape_walkthrough(2, 5, 16, 4, seed=5)) as other:
        for _ in range(200):
            built = _weights(anatomy.TinyLM(TINY_LM))
            differ += any(not torch.equal(a, b) for a, b in zip(alone, built))
    assert other.runs > 0, "the other thread never ran: the test measured nothing"
    assert differ == 0, f"{differ} of 200 builds differ from a build made alone"


def test_seeded_demos_are_the_same_while_another_thread_builds_models():
    alone = mechanics.compare_variants(16, 4, 2, 6, seed=3)
    with _Meanwhile(lambda: anatomy.TinyLM(anatomy.TinyLMConfig(seed=1))) as other:
        for _ in range(60):
            again = mechanics.compare_variants(16, 4, 2, 6, seed=3)
            assert (again.weights == alone.weights).all()
    assert other.runs > 0


def test_seeded_leaves_the_process_generator_as_it_was_and_nests():
    before = torch.get_rng_state()
    with seeding.seeded(7):
        a = torch.randn(3)
        with seeding.seeded(8):
            inner = torch.randn(3)
        b = torch.randn(3)
    assert torch.equal(torch.get_rng_state(), before)
    with seeding.seeded(7):
        assert torch.equal(torch.randn(3), a)
        assert torch.equal(torch.randn(3), b)  # the inner block did not consume the outer one's draws
    with seeding.seeded(8):
        assert torch.equal(torch.randn(3), inner)


def test_a_random_stream_continues_where_it_left_off():
    stream = seeding.RandomStream(4)
    with stream.active():
        first = torch.randn(5)
    torch.randn(100)  # someone else's draws in between
    with stream.active():
        second = torch.randn(5)
    with seeding.seeded(4):
        assert torch.equal(torch.randn(5), first)
        assert torch.equal(torch.randn(5), second)


def _seq2seq_losses(steps: int) -> list[float]:
    cfg = ModelConfig(d_model=32, n_heads=2, n_enc_layers=1, n_dec_layers=1, d_ff=64, resid_dropout=0.2,
                      attn_dropout=0.2, emb_dropout=0.1)
    trainer = Trainer(make_task("copy", min_len=3, max_len=6), cfg,
                      TrainConfig(max_steps=steps, max_seconds=1e9, batch_size=8, eval_every=10_000, log_every=1,
                                  check_every=0, seed=2), device="cpu")
    return [trainer._train_step()[0] for _ in range(steps)]


def _lm_losses(steps: int) -> list[float]:
    trainer = LMTrainer(LMTrainConfig(max_steps=steps, max_seconds=1e9, batch_size=4, eval_every=10_000, seed=3),
                        device="cpu")
    return [trainer._train_step() for _ in range(steps)]


@pytest.mark.parametrize("losses", [_seq2seq_losses, _lm_losses], ids=["seq2seq", "lm"])
def test_a_training_draws_the_same_whatever_runs_beside_it(losses):
    """Initial weights and dropout masks come from the training's own stream: the same seed gives the same losses,
    bit for bit, while another training of the same kind and a visitor's seeded demo run on other threads."""
    alone = losses(12)
    beside = []
    with _Meanwhile(lambda: beside.append(losses(3))), \
            _Meanwhile(lambda: mechanics.shape_walkthrough(2, 5, 16, 4, seed=5)) as demo:
        together = losses(12)
    assert demo.runs > 0 and beside, "nothing ran beside the training: the test measured nothing"
    assert together == alone


def test_no_code_seeds_the_process_generator_directly():
    """torch.manual_seed reseeds the generator every thread shares: seeded code goes through viz_core.runtime.seeding."""
    offenders = []
    for path in [*ROOT.joinpath("viz_core").rglob("*.py"), *ROOT.joinpath("app_pages").rglob("*.py")]:
        if path.name == "seeding.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("manual_seed", "seed", "set_rng_state") \
                    and ast.unparse(node.func.value) in ("torch", "torch.random", "torch.cuda"):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
