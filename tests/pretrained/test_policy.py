"""The model box policy: settings, the checks made before any download, and load_model's refusals and messages.

No network here: the hub's metadata call, the reachability check, the download and the offline cache lookup are
replaced by fakes; a tiny random BERT saved to a temporary folder stands in for a downloaded model.
"""
from __future__ import annotations

import json
import logging
from unittest.mock import MagicMock

import pytest
import torch
from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError
from transformers import AutoTokenizer, BertConfig, BertModel

from viz_core import errors, i18n
from viz_core.pretrained import load as pretrained
from viz_core.errors import InputError
from viz_core.pretrained.policy import (DEFAULT_ALLOWED, ENV, ModelPolicy, folder_files, is_hub_id, side_files,
                                   weight_files)

MB = 10 ** 6


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    """A tiny random BERT (safetensors) with the packaged tokenizer, as a hub download would leave it."""
    path = tmp_path_factory.mktemp("tiny_bert")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(path)
    AutoTokenizer.from_pretrained(pretrained.default_model_path()).save_pretrained(path)
    return path


class FakeHub:
    """Stands in for the network: records every call, fails the test if a refused model reaches the download."""

    def __init__(self, monkeypatch, reachable=True, files=None, listing_error=None, folder=None):
        self.calls = []
        self.files, self.listing_error, self.folder = files or {}, listing_error, folder
        monkeypatch.setattr(pretrained, "_hub_reachable", lambda *a, **k: self._log("reachable") or reachable)
        monkeypatch.setattr(pretrained, "_hub_listing", self.listing)
        monkeypatch.setattr(pretrained, "_download", self.download)
        monkeypatch.setattr(pretrained, "_cached_snapshot", self.cached)

    def _log(self, *call):
        self.calls.append(call)

    def listing(self, repo_id):
        self._log("listing", repo_id)
        if self.listing_error is not None:
            raise self.listing_error
        return "abc123", dict(self.files)

    def download(self, repo_id, sha, files):
        self._log("download", repo_id, sha, tuple(files))
        return self.folder

    def cached(self, repo_id):
        self._log("cached", repo_id)
        if self.folder is None:
            raise LocalEntryNotFoundError("Cannot find an appropriate cached snapshot folder in /root/.cache/hf")
        return self.folder

    def names(self):
        return [c[0] for c in self.calls]


def _refusal(name, policy=None, lang="zh") -> tuple[str, str]:
    with pytest.raises(InputError) as err:
        pretrained.load_model(name, policy=policy or ModelPolicy())
    return err.value.code, i18n.t(err.value.code, lang, **err.value.params)


def _assert_clean(text: str, *secrets: str) -> None:
    """No server path, library message or traceback in a message shown to a visitor."""
    for bad in ("/root", "/tmp", "/home", ".cache", "Traceback", "Error", "404", *secrets):
        assert bad not in text, (bad, text)


# ---------------------------------------------------------------- settings
def test_defaults_are_the_safe_ones():
    p = ModelPolicy.from_settings(env={}, secrets={})
    assert p == ModelPolicy()
    assert (p.allow_local, p.allow_any_hub, p.local_dir, p.max_model_mb) == (False, False, None, 800)
    assert p.allowlist == DEFAULT_ALLOWED and "bert-base-chinese" in p.allowlist and "gpt2" in p.allowlist


def test_environment_variables_and_secrets_table():
    secrets = {"allow_local": True, "local_dir": "/srv/models", "allowlist": ["gpt2"], "extra_models": ["t5-small"],
               "max_model_mb": 300, "allow_any_hub": False}
    p = ModelPolicy.from_settings(env={}, secrets=secrets)
    assert (p.allow_local, p.local_dir, p.allowlist, p.max_model_mb) == (True, "/srv/models", ("gpt2", "t5-small"),
                                                                          300)
    env = {ENV["allow_local"]: "0", ENV["allow_any_hub"]: "yes", ENV["max_model_mb"]: "1200",
           ENV["allowlist"]: "distilgpt2, bert-base-chinese", ENV["extra_models"]: "org/model-a org/model-b"}
    p = ModelPolicy.from_settings(env=env, secrets=secrets)  # environment variables win over secrets.toml
    assert (p.allow_local, p.allow_any_hub, p.max_model_mb) == (False, True, 1200)
    assert p.allowlist == ("distilgpt2", "bert-base-chinese", "org/model-a", "org/model-b")
    assert p.local_dir == "/srv/models"  # not set in the environment: the secrets value stands


@pytest.mark.parametrize("key, value", [("allow_local", "maybe"), ("allow_any_hub", "2"), ("max_model_mb", "lots"),
                                        ("max_model_mb", "-5")])
def test_unreadable_settings_keep_the_safe_default(key, value, caplog):
    with caplog.at_level(logging.WARNING, logger="viz_core.pretrained.policy"):
        p = ModelPolicy.from_settings(env={ENV[key]: value}, secrets={})
    assert p == ModelPolicy() and p.notes and key in caplog.text


def test_allowlist_ignores_paths_and_accepts_the_hubs_other_spelling():
    p = ModelPolicy.from_settings(env={ENV["allowlist"]: "gpt2,/etc/passwd,../x"}, secrets={})
    assert p.allowlist == ("gpt2",) and p.notes
    assert p.allows_hub("gpt2") and p.allows_hub("openai-community/gpt2") and p.allows_hub("GPT2")
    assert not p.allows_hub("gpt2-xl") and not p.allows_hub("meta-llama/Llama-2-70b-hf")
    assert ModelPolicy(allow_any_hub=True).allows_hub("meta-llama/Llama-2-70b-hf")


@pytest.mark.parametrize("name, hub", [("gpt2", True), ("Helsinki-NLP/opus-mt-en-zh", True), ("/tmp", False),
                                       ("~/models", False), ("../etc", False), ("a/b/c", False), ("C:\\x", False),
                                       ("./gpt2", False), ("org--x/y", False)])
def test_what_counts_as_a_hub_id(name, hub):
    assert is_hub_id(name) is hub


# ---------------------------------------------------------------- which files, how big
def test_weight_and_side_files():
    single = {"model.safetensors": 5, "pytorch_model.bin": 5, "config.json": 1, "vocab.txt": 1,
              "onnx/model.onnx": 9, "tf_model.h5": 5, "2_Dense/model.safetensors": 3, "README.md": 1}
    assert weight_files(single) == ["model.safetensors"]
    assert side_files(single) == ["config.json", "vocab.txt"]
    sharded = {"model.safetensors.index.json": 1, "model-00001-of-00002.safetensors": 4,
               "model-00002-of-00002.safetensors": 4, "config.json": 1}
    assert weight_files(sharded) == ["model.safetensors.index.json", "model-00001-of-00002.safetensors",
                                     "model-00002-of-00002.safetensors"]
    assert weight_files({"pytorch_model.bin": 5, "config.json": 1}) == []
    assert weight_files({"model.safetensors.index.json": 1}) == []  # an index without shards loads nothing


def test_size_check_counts_everything_downloaded():
    files = {"model.safetensors": 700 * MB, "config.json": 1000, "tokenizer.json": 50 * MB}
    with pytest.raises(InputError) as err:
        ModelPolicy(max_model_mb=740).files_to_fetch("m", files)
    assert err.value.code == "attention.model_too_big" and err.value.params["size"] == "750"
    assert ModelPolicy(max_model_mb=760).files_to_fetch("m", files) == ["model.safetensors", "config.json",
                                                                       "tokenizer.json"]
    with pytest.raises(InputError) as err:
        ModelPolicy().files_to_fetch("m", {"model.safetensors": None, "config.json": 10})
    assert err.value.code == "attention.model_size_unknown"


# ---------------------------------------------------------------- load_model: refusals before any download
@pytest.mark.parametrize("path", ["/tmp", "/etc", "~/.ssh", "../../", "./viz_core", "C:\\Windows"])
def test_server_folders_are_off_by_default(path, monkeypatch):
    hub = FakeHub(monkeypatch)
    looked = []
    monkeypatch.setattr(pretrained.Path, "is_dir", lambda self: looked.append(self) or True)
    code, text = _refusal(path)
    assert code == "attention.model_local_off"
    assert hub.calls == [] and looked == []  # neither the network nor the file system was asked
    _assert_clean(text, path.strip("./~\\") or path)
    assert "bert-base-uncased" in text and "Hugging Face" in text


def test_a_name_that_is_also_a_server_folder_is_never_read_as_one(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "secrets").mkdir()
    hub = FakeHub(monkeypatch)
    code, text = _refusal("secrets")
    assert code == "attention.model_not_allowed" and hub.calls == []


def test_ids_off_the_allowlist_are_refused_without_network(monkeypatch):
    hub = FakeHub(monkeypatch)
    code, text = _refusal("meta-llama/Llama-2-70b-hf")
    assert code == "attention.model_not_allowed" and hub.calls == []
    assert "meta-llama/Llama-2-70b-hf" in text and "bert-base-uncased" in text and "运行此服务器的人" in text
    code, text = _refusal("meta-llama/Llama-2-70b-hf", lang="en")
    assert "ask" not in text or "whoever runs this server" in text
    assert "Choose one of: bert-base-uncased" in text


def test_too_big_is_refused_from_metadata_before_download(monkeypatch):
    hub = FakeHub(monkeypatch, files={"model.safetensors": 138_000 * MB, "config.json": 700})
    code, text = _refusal("meta-llama/Llama-2-70b-hf", ModelPolicy(allow_any_hub=True), lang="en")
    assert code == "attention.model_too_big"
    assert "138,000 MB" in text and "800 MB" in text and "bert-base-uncased" in text
    assert hub.names() == ["reachable", "listing"]  # the download was never started
    hub = FakeHub(monkeypatch, files={"model.safetensors": 548 * MB, "config.json": 700})
    code, _ = _refusal("gpt2", ModelPolicy(max_model_mb=500))  # an allowlisted model is size-checked too
    assert code == "attention.model_too_big" and "download" not in hub.names()


def test_no_safetensors_is_refused_before_download(monkeypatch):
    hub = FakeHub(monkeypatch, files={"pytorch_model.bin": 400 * MB, "config.json": 700, "vocab.txt": 200})
    code, text = _refusal("bert-base-uncased")
    assert code == "attention.model_no_safetensors" and "download" not in hub.names()
    assert "safetensors" in text and "bert-base-uncased" in text


def test_unknown_repository(monkeypatch):
    error = RepositoryNotFoundError("404 Client Error for url https://huggingface.co/api/models/x (/root/.cache)",
                                    response=MagicMock())
    FakeHub(monkeypatch, listing_error=error)
    code, text = _refusal("no-such-org/no-such-model", ModelPolicy(allow_any_hub=True))
    assert code == "attention.model_not_found"
    _assert_clean(text)
    assert "no-such-org/no-such-model" in text


def test_offline_and_not_cached(monkeypatch):
    hub = FakeHub(monkeypatch, reachable=False)
    code, text = _refusal("gpt2", lang="en")
    assert code == "attention.model_offline" and hub.names() == ["reachable", "cached"]
    _assert_clean(text)
    assert "default model works offline" in text


def test_allowed_model_downloads_exactly_the_checked_files_at_the_checked_commit(monkeypatch, tiny_folder):
    hub = FakeHub(monkeypatch, files=folder_files(tiny_folder) | {"pytorch_model.bin": 10 ** 9,
                                                                   "onnx/model.onnx": 10 ** 9},
                  folder=tiny_folder)
    m = pretrained.load_model("bert-base-uncased")
    assert (m.name, m.kind, m.n_layers, m.n_heads) == ("bert-base-uncased", "encoder", 2, 4)
    (_, repo, sha, files), = [c for c in hub.calls if c[0] == "download"]
    assert (repo, sha) == ("bert-base-uncased", "abc123")
    assert {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"} <= set(files)
    assert "pytorch_model.bin" not in files and "onnx/model.onnx" not in files


def test_offline_uses_the_cache_with_the_same_size_check(monkeypatch, tiny_folder):
    FakeHub(monkeypatch, reachable=False, folder=tiny_folder)
    assert pretrained.load_model("gpt2").n_layers == 2  # the cached snapshot (here: the tiny folder) loads
    code, _ = _refusal("gpt2", ModelPolicy(max_model_mb=0))
    assert code == "attention.model_too_big"


# ---------------------------------------------------------------- folders, when the operator enables them
def test_folders_when_enabled_and_the_models_folder(monkeypatch, tiny_folder, tmp_path):
    FakeHub(monkeypatch)
    assert pretrained.load_model(str(tiny_folder), policy=ModelPolicy(allow_local=True)).n_layers == 2
    inside = ModelPolicy(allow_local=True, local_dir=str(tiny_folder.parent))
    assert pretrained.load_model(str(tiny_folder), policy=inside).n_layers == 2
    code, text = _refusal(str(tiny_folder), ModelPolicy(allow_local=True, local_dir=str(tmp_path)))
    assert code == "attention.model_local_outside"
    _assert_clean(text, tiny_folder.name)
    code, text = _refusal(str(tmp_path / "missing"), ModelPolicy(allow_local=True))
    assert code == "attention.model_not_found"
    _assert_clean(text, str(tmp_path))


def test_unsupported_architecture_and_damaged_files(monkeypatch, tmp_path, tiny_folder):
    FakeHub(monkeypatch)
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "config.json").write_text(json.dumps({"model_type": "no_such_architecture"}))
    (odd / "model.safetensors").write_bytes(b"not really")
    code, text = _refusal(str(odd), ModelPolicy(allow_local=True), lang="en")
    assert code == "attention.model_unsupported"
    _assert_clean(text, str(tmp_path), "no_such_architecture")
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in tiny_folder.iterdir():
        (broken / f.name).write_bytes(f.read_bytes()[:100] if f.name == "model.safetensors" else f.read_bytes())
    code, text = _refusal(str(broken), ModelPolicy(allow_local=True))
    assert code == "attention.model_unavailable"
    _assert_clean(text, str(tmp_path))


def test_load_failures_are_logged_with_the_library_message(monkeypatch, tmp_path, caplog):
    FakeHub(monkeypatch)
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "config.json").write_text(json.dumps({"model_type": "no_such_architecture"}))
    (odd / "model.safetensors").write_bytes(b"x")
    with caplog.at_level(logging.WARNING, logger="viz_core.pretrained.load"):
        _refusal(str(odd), ModelPolicy(allow_local=True))
    assert "no_such_architecture" in caplog.text and "Traceback" in caplog.text


@pytest.mark.parametrize("code", ["model_local_off", "model_local_outside", "model_not_allowed", "model_too_big",
                                  "model_no_safetensors", "model_size_unknown", "model_not_found", "model_offline",
                                  "model_unsupported", "model_unavailable"])
def test_every_refusal_is_translated(code):
    params = {"name": "x", "allowed": "gpt2", "size": "9", "limit": "1"}
    en, zh = (i18n.t(f"attention.{code}", lang, **params) for lang in ("en", "zh"))
    assert en != zh and any("\u4e00" <= ch <= "\u9fff" for ch in zh)


# ---------------------------------------------------------------- unexpected errors
def test_unexpected_errors_get_an_id_and_a_logged_traceback(caplog):
    try:
        open("/no/such/server/path/secret.txt")
    except OSError as exc:
        with caplog.at_level(logging.ERROR, logger="viz_core.errors"):
            error_id = errors.report_unexpected(exc, "attention")
    assert len(error_id) == 8 and error_id in caplog.text
    assert "Traceback" in caplog.text and "/no/such/server/path" in caplog.text  # the log has it all...
    shown = i18n.t("common.unexpected_error", "zh", error_id=error_id)
    assert error_id in shown and "/no/such" not in shown and "FileNotFoundError" not in shown  # ...the page not
