"""The server-wide memory budget (viz_core/runtime/budget.py): the reading, the relievers, the refusal, and every large
allocation that asks it first (model computations, the shared caches, uploads and their decompression, trainings,
uploaded models, loading a model). The resident size is faked where a test needs the server to be full."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from viz_core.runtime import budget
from viz_core.errors import InputError
from viz_core.i18n import t

MB = 2**20


@pytest.fixture
def memory(monkeypatch):
    """A fake resident size (bytes, in a one-element list) under a 1,000 MB budget, with no relievers but the
    test's own, and no throttle between reliefs."""
    rss = [500 * MB]
    monkeypatch.setenv("ATTN_MEMORY_BUDGET_MB", "1000")
    monkeypatch.setattr(budget, "rss_bytes", lambda: rss[0])
    monkeypatch.setattr(budget, "_relievers", [])
    monkeypatch.setattr(budget, "RELIEF_EVERY_S", 0.0)
    return rss


def test_the_budget_setting(monkeypatch):
    monkeypatch.delenv("ATTN_MEMORY_BUDGET_MB", raising=False)
    assert budget.limit_bytes() == int(0.75 * budget.machine_bytes())  # three quarters of what the server may use
    monkeypatch.setattr(budget, "machine_bytes", lambda: 2048 * MB)   # a 2 GB machine
    assert budget.limit_bytes() == 1536 * MB
    monkeypatch.setattr(budget, "machine_bytes", lambda: 0)           # nothing readable
    assert budget.limit_bytes() == budget.DEFAULT_MB * MB == 1536 * MB
    monkeypatch.setenv("ATTN_MEMORY_BUDGET_MB", "900")
    assert budget.limit_bytes() == 900 * MB
    monkeypatch.setenv("ATTN_MEMORY_BUDGET_MB", "lots")
    assert budget.limit_bytes() == 1536 * MB
    monkeypatch.setenv("ATTN_MEMORY_BUDGET_MB", "0")  # off: everything fits
    assert budget.limit_bytes() == 0 and budget.excess(10**15) == 0


def test_the_memory_the_server_may_use_is_read_from_the_machine():
    with open("/proc/meminfo") as f:
        total = int(next(line for line in f if line.startswith("MemTotal:")).split()[1]) * 1024
    assert 0 < budget.machine_bytes() <= total


def test_the_resident_size_is_read_from_proc():
    assert budget.rss_bytes() > 10 * MB


def test_a_request_fits_until_the_budget_is_spent(memory):
    assert budget.excess(400 * MB) == 0
    assert budget.excess(600 * MB) == 100 * MB
    budget.admit(500 * MB, "a test")  # exactly the budget
    refused = budget.refusals[0]
    with pytest.raises(budget.ServerBusy) as caught:
        budget.admit(501 * MB, "a test")
    assert budget.refusals[0] == refused + 1
    assert isinstance(caught.value, InputError) and caught.value.code == "common.server_busy"
    assert caught.value.params == {"need": "501", "rss": "500", "limit": "1000"}


def test_relievers_run_cheapest_first_and_only_as_far_as_needed(memory):
    calls = []

    def frees(name, n):
        def relieve():
            calls.append(name)
            memory[0] -= n * MB
        return relieve

    for name, n in (("collect", 50), ("older half", 200), ("all", 200)):
        budget.on_pressure(frees(name, n))
    budget.admit(200 * MB, "a test")  # 500 + 200 fits: nothing is relieved
    assert calls == []
    budget.admit(700 * MB, "a test")  # 500 - 50 - 200 = 250 + 700 fits after the second
    assert calls == ["collect", "older half"]
    with pytest.raises(budget.ServerBusy):  # 250 - 50 - 200 - 200 < 0 ... the fake goes negative; ask for more
        budget.admit(2000 * MB, "a test")
    assert calls == ["collect", "older half", "collect", "older half", "all"]


def test_a_crowd_of_refusals_relieves_at_most_once_a_second(memory, monkeypatch):
    monkeypatch.setattr(budget, "RELIEF_EVERY_S", 60.0)
    monkeypatch.setattr(budget, "_last_relief", [-1e9])
    calls = []
    budget.on_pressure(lambda: calls.append(1))
    for _ in range(5):
        assert budget.fits(600 * MB) is False
    assert calls == [1]


def test_a_failing_reliever_does_not_break_the_check(memory):
    def broken():
        raise RuntimeError("no")
    budget.on_pressure(broken)
    assert budget.fits(100 * MB) and not budget.fits(600 * MB)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_refusal_reads_in_both_languages(lang):
    exc = budget.ServerBusy("a test", 96 * MB, 1500 * MB, 1536 * MB)
    text = t(exc.code, lang=lang, **exc.params)
    assert "1500" in text and "1536" in text and "96" in text
    assert ("busy" in text) if lang == "en" else ("服务器正忙" in text)


# ---------------------------------------------------------------- what asks the budget first
def test_a_shared_cache_makes_room_for_a_new_entry_when_the_server_is_over(memory):
    from app_pages._ui.caches import ByteBoundedCache
    cache = ByteBoundedCache(100 * MB)
    for key in "abc":
        cache.get(key, lambda: np.zeros(MB // 8))
    assert list(cache.items) == ["a", "b", "c"]
    memory[0] = 1001 * MB  # 1 MB over: the oldest entry goes
    cache.get("d", lambda: np.zeros(MB // 8))
    assert list(cache.items) == ["b", "c", "d"]
    memory[0] = 2000 * MB  # far over: only the newest stays
    cache.get("e", lambda: np.zeros(MB // 8))
    assert list(cache.items) == ["e"] and cache.used == MB


def test_a_shared_cache_sheds_its_older_half():
    from app_pages._ui.caches import ByteBoundedCache
    cache = ByteBoundedCache(100 * MB)
    for key in "abcd":
        cache.get(key, lambda: np.zeros(MB // 8))
    assert cache.shrink(0.5) == 2 * MB and list(cache.items) == ["c", "d"]
    assert cache.shrink(0.0) == 2 * MB and cache.used == 0


def test_the_server_relieves_pressure_with_its_caches_before_refusing(monkeypatch):
    """memory.py registers: a collection, then the older half of every shared cache, then all of them."""
    from app_pages._ui import memory as server_memory
    assert budget._relievers[:3] == [server_memory.release, server_memory.shed_older_half, server_memory.shed_all]


def test_a_model_computation_is_refused_when_the_server_is_full(memory):
    from app_pages._ui import models
    with models.heavy():
        pass
    memory[0] = 1000 * MB - budget.COMPUTATION_BYTES + 1
    with pytest.raises(budget.ServerBusy):
        with models.heavy():
            pytest.fail("the computation ran")
    assert models._active[0] == 0
    memory[0] = 1000 * MB - budget.LONG_COMPUTATION_BYTES + 1  # room for a short computation, not a long one
    with models.heavy():
        pass
    with pytest.raises(budget.ServerBusy):
        with models.heavy(long=True):
            pytest.fail("the long computation ran")
    memory[0] = 500 * MB
    with models.heavy(long=True):  # the refused request gave its places back: the next one runs
        pass


def test_an_upload_is_refused_with_503_before_its_body_is_read_when_the_server_is_full(memory, monkeypatch):
    from app_pages._ui import serving
    from tests.test_serving import _accept, put
    monkeypatch.setattr(serving, "_stored_files", lambda: {})
    limit = serving.UploadLimit(_accept, files=4, session_mb=64, total_mb=128)
    assert put(limit, "s", "a", 10 * MB) == 204
    memory[0] = 995 * MB
    assert put(limit, "s", "b", 10 * MB) == 503
    assert put(limit, "s", "c", 4 * MB) == 204  # a smaller one still fits
    assert not limit._in_flight  # the refused one was never counted as in flight


def test_an_upload_is_unpacked_only_within_the_budget(memory):
    from viz_core.io.export import zip_bytes
    from viz_core.io.uploads import zip_members
    data = zip_bytes({"config.json": b"{}"})
    assert zip_members("c.zip", data, ("config.json",), 10 * MB) == {"config.json": b"{}"}
    memory[0] = 995 * MB  # the 10 MB it may inflate to do not fit
    with pytest.raises(budget.ServerBusy):
        zip_members("c.zip", data, ("config.json",), 10 * MB)


def test_a_training_on_the_cpu_is_refused_when_the_server_is_full(memory):
    from viz_core.lm.training import LMTrainConfig, check_fits as lm_fits
    from viz_core.seq2seq.tasks import make_task
    from viz_core.seq2seq.training import TrainConfig, check_fits
    from viz_core.seq2seq.model import ModelConfig
    cfg = TrainConfig(force_cpu=True)
    task = make_task("reverse")
    _, need = check_fits(task, ModelConfig(), cfg)
    _, lm_need = lm_fits(LMTrainConfig(force_cpu=True))
    memory[0] = 1000 * MB - min(need, lm_need) + 1
    with pytest.raises(budget.ServerBusy):
        check_fits(task, ModelConfig(), cfg)
    with pytest.raises(budget.ServerBusy):
        lm_fits(LMTrainConfig(force_cpu=True))


def test_an_uploaded_model_is_refused_when_the_server_is_full_and_the_shipped_ones_still_load(memory):
    from viz_core.seq2seq.checkpoint import load_checkpoint_files
    from viz_core.seq2seq.training import load_checkpoint
    folder = Path(__file__).resolve().parents[1] / "viz_core" / "checkpoints" / "reverse"
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert load_checkpoint_files(dict(files)) is not None
    memory[0] = 1000 * MB
    with pytest.raises(budget.ServerBusy):
        load_checkpoint_files(dict(files))
    assert load_checkpoint(folder) is not None  # the server's own files: outside the budget


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    import torch
    from transformers import GPT2Config, GPT2Model

    from tests.pretrained.tiny_models import save_with_default_tokenizer
    torch.manual_seed(0)
    model = GPT2Model(GPT2Config(vocab_size=30522, n_embd=32, n_layer=2, n_head=4, n_positions=64))
    return Path(save_with_default_tokenizer({"gpt2": model}, tmp_path_factory.mktemp)["gpt2"])


def test_loading_a_model_is_refused_when_its_weights_do_not_fit(memory, tiny_model_dir):
    from viz_core.pretrained import load
    need = load._weights_bytes(tiny_model_dir)
    assert need > 0
    memory[0] = 1000 * MB - need + 1
    with pytest.raises(budget.ServerBusy):
        load._load_folder("tiny", str(tiny_model_dir))
    memory[0] = 1000 * MB - need
    assert load._load_folder("tiny", str(tiny_model_dir)).model is not None


# ---------------------------------------------------------------- pages
@pytest.mark.parametrize("page, go", [("train", "train.go"), ("language_model", "lm.train")])
def test_a_full_server_refuses_a_training_on_its_page_and_says_why(monkeypatch, page, go):
    from tests.conftest import assert_clean, run_page
    monkeypatch.setenv("ATTN_MEMORY_BUDGET_MB", "1")
    at = run_page(page, {"lang": "zh", "cpu": "1"} if page == "train" else {"lang": "zh"})
    assert_clean(at)
    assert any("服务器正忙" in e.value for e in at.error)
    start = [b for b in at.button if b.label == t(go, "zh")]
    assert start and all(b.disabled for b in start)
