"""Settings from the environment: each variable unset, valid and invalid, read at call time."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from backend import config
from backend.errors import ParameterError
from tests.conftest import ROOT

MB = 1024 * 1024
VARIABLES = (
    "CHUNKLAB_MAX_FILE_MB",
    "CHUNKLAB_DATA_DIR",
    "CHUNKLAB_CACHE_DIR",
    "CHUNKLAB_CACHE_MAX_MB",
    "CHUNKLAB_DEVICE",
    "CHUNKLAB_LM",
    "CHUNKLAB_EMBEDDER",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_ENDPOINT",
    "HF_HUB_DISABLE_PROGRESS_BARS",
    "CHROMA_HOST",
    "CHROMA_PORT",
    "CHROMA_TIMEOUT",
    "CHUNKLAB_DEBUG",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_defaults_when_nothing_is_set(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config.max_file_bytes() == 50 * MB
    assert config.data_dir() == tmp_path / ".chunklab"
    assert config.cache_dir() == tmp_path / ".chunklab" / "cache"
    assert config.cache_max_bytes() == 2048 * MB
    assert (config.default_device_spec(), config.default_lm_spec(), config.default_embedder_spec()) == ("", "", "")
    assert (config.hub_offline(), config.hub_offline_variable()) == (False, None)
    assert config.hf_endpoint() == "https://huggingface.co"
    assert (config.chroma_host(), config.chroma_port(), config.chroma_timeout()) == (None, None, 10.0)
    assert config.debug() is False


def test_valid_values_are_read_at_call_time(monkeypatch, tmp_path):
    settings = {
        "CHUNKLAB_MAX_FILE_MB": " 1.5 ",
        "CHUNKLAB_DATA_DIR": f" {tmp_path / 'data'} ",
        "CHUNKLAB_CACHE_MAX_MB": "3",
        "CHUNKLAB_DEVICE": " CUDA:1 ",
        "CHUNKLAB_LM": " ./models/tiny ",
        "CHUNKLAB_EMBEDDER": "\tsentence-transformers/all-MiniLM-L6-v2\n",
        "HF_ENDPOINT": "http://mirror.local:8080",
        "CHROMA_HOST": " chroma.internal ",
        "CHROMA_PORT": "9001",
        "CHROMA_TIMEOUT": "2.5",
        "CHUNKLAB_DEBUG": "1",
    }
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    assert config.max_file_bytes() == int(1.5 * MB)
    assert config.data_dir() == tmp_path / "data"
    assert config.cache_dir() == tmp_path / "data" / "cache"  # follows the data dir
    assert config.cache_max_bytes() == 3 * MB
    assert config.default_device_spec() == "CUDA:1"  # select_device normalizes and checks it
    assert config.default_lm_spec() == "./models/tiny"
    assert config.default_embedder_spec() == "sentence-transformers/all-MiniLM-L6-v2"
    assert config.hf_endpoint() == "http://mirror.local:8080"
    assert (config.chroma_host(), config.chroma_port(), config.chroma_timeout()) == ("chroma.internal", 9001, 2.5)
    assert config.debug() is True
    monkeypatch.setenv("CHUNKLAB_CACHE_DIR", "~/elsewhere")
    assert config.cache_dir() == Path("~/elsewhere").expanduser()


@pytest.mark.parametrize("value", ["lots", "0", "-3", "nan", "inf", "1e999", "  "])
def test_sizes_that_are_not_positive_finite_numbers_mean_the_default(monkeypatch, value):
    monkeypatch.setenv("CHUNKLAB_MAX_FILE_MB", value)
    monkeypatch.setenv("CHUNKLAB_CACHE_MAX_MB", value)
    assert (config.max_file_bytes(), config.cache_max_bytes()) == (50 * MB, 2048 * MB)


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", ""])
def test_a_bad_chroma_timeout_means_the_default(monkeypatch, value):
    monkeypatch.setenv("CHROMA_TIMEOUT", value)
    assert config.chroma_timeout() == 10.0


@pytest.mark.parametrize("value", ["eighty", "0", "65536", "-1", "80.5"])
def test_a_bad_chroma_port_is_a_one_line_error(monkeypatch, value):
    monkeypatch.setenv("CHROMA_PORT", value)
    with pytest.raises(ParameterError) as info:
        config.chroma_port()
    assert str(info.value) == f"CHROMA_PORT must be a port number, got {value!r}"


def test_blank_strings_count_as_unset(monkeypatch):
    for name in ("CHUNKLAB_LM", "CHUNKLAB_EMBEDDER", "CHUNKLAB_DEVICE", "CHROMA_HOST", "CHROMA_PORT", "HF_ENDPOINT"):
        monkeypatch.setenv(name, "   ")
    assert (config.default_lm_spec(), config.default_embedder_spec(), config.default_device_spec()) == ("", "", "")
    assert (config.chroma_host(), config.chroma_port(), config.hf_endpoint()) == (None, None, "https://huggingface.co")


@pytest.mark.parametrize(
    ("hub", "transformers", "expected"),
    [
        ("1", "", "HF_HUB_OFFLINE"),
        (" TRUE ", "", "HF_HUB_OFFLINE"),
        ("", "yes", "TRANSFORMERS_OFFLINE"),
        ("on", "1", "HF_HUB_OFFLINE"),
        ("0", "false", None),
        ("offline", "", None),
    ],
)
def test_hub_offline_names_the_variable(monkeypatch, hub, transformers, expected):
    monkeypatch.setenv("HF_HUB_OFFLINE", hub)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", transformers)
    assert config.hub_offline_variable() == expected
    assert config.hub_offline() is (expected is not None)


def test_debug_is_any_non_empty_value(monkeypatch):
    monkeypatch.setenv("CHUNKLAB_DEBUG", "0")
    assert config.debug() is True  # as before: set means on, whatever the value
    monkeypatch.setenv("CHUNKLAB_DEBUG", "")
    assert config.debug() is False


def test_progress_bars_are_quieted_unless_the_user_chose(monkeypatch):
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "")  # so that teardown restores what was there
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS")
    config.quiet_hub_progress_bars()
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")
    config.quiet_hub_progress_bars()
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "0"


def test_quiet_hub_progress_bars_holds_after_the_hub_was_imported():
    # The model modules import huggingface_hub at their top, so the variable alone comes too late.
    code = (
        "import huggingface_hub.utils as u, backend.models.lm\n"
        "from backend.config import quiet_hub_progress_bars\n"
        "before = u.are_progress_bars_disabled()\n"
        "quiet_hub_progress_bars()\n"
        "print(before, u.are_progress_bars_disabled())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_every_variable_read_is_in_the_registry_and_every_registered_one_is_read():
    # The docs' environment table is generated from config.ENVIRONMENT, so it lists exactly what the readers read.
    source = Path(config.__file__).read_text(encoding="utf-8")
    readers = source[source.index("_BY_NAME = "):]
    read = set(re.findall(r'"((?:CHUNKLAB|CHROMA|OPENAI|HF|TRANSFORMERS|RAY)_[A-Z0-9_]+)"', readers))
    registered = [v.name for v in config.ENVIRONMENT]
    assert len(registered) == len(set(registered))
    assert read == set(registered)


def test_a_reader_of_an_unregistered_variable_fails_at_its_first_call():
    with pytest.raises(KeyError, match="CHUNKLAB_NOT_DECLARED"):
        config._env_text("CHUNKLAB_NOT_DECLARED")
