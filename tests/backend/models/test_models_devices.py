"""Device choice, dtypes, batch sizes and the out-of-memory back-off of backend.models.devices."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import backend.models.devices as devices
from backend.config import default_torch_threads, torch_threads
from backend.errors import Cancelled, ModelError, ParameterError
from backend.models.devices import (
    default_dtype,
    free_memory_bytes,
    is_out_of_memory,
    run_batched,
    select_device,
    suggest_batch_size,
)
from tests.conftest import ROOT


def test_model_modules_import_without_torch():
    code = (
        "import sys, backend.models.devices, backend.models.lm, backend.models.scorer\n"
        "print(','.join(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_cpu_is_always_available(monkeypatch):
    monkeypatch.delenv("CHUNKLAB_DEVICE", raising=False)
    assert select_device("cpu") == "cpu"
    assert select_device(" CPU ") == "cpu"


def test_auto_prefers_cuda_then_mps_then_cpu(monkeypatch):
    monkeypatch.delenv("CHUNKLAB_DEVICE", raising=False)
    expected = "cpu"
    if torch.cuda.is_available():
        expected = f"cuda:{torch.cuda.current_device()}"
    elif torch.backends.mps.is_available():
        expected = "mps"
    assert select_device() == expected
    assert select_device("auto") == expected


def test_environment_variable_is_the_default(monkeypatch):
    monkeypatch.setenv("CHUNKLAB_DEVICE", "cpu")
    assert select_device() == "cpu"
    assert select_device(None) == "cpu"
    monkeypatch.setenv("CHUNKLAB_DEVICE", "tpu")
    with pytest.raises(ParameterError, match="CHUNKLAB_DEVICE 'tpu' is not a device"):
        select_device()
    assert select_device("cpu") == "cpu"  # an explicit choice wins over the variable


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "cpu:1", "mps:0", "cuda:-1"])
def test_bad_device_names_are_rejected_in_one_line(bad):
    with pytest.raises(ParameterError) as e:
        select_device(bad)
    assert repr(bad) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("name", ["cuda", "cuda:1"])
def test_missing_cuda_is_named(name):
    with pytest.raises(ParameterError, match=f"'{name}': CUDA is not available"):
        select_device(name)


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="this machine has MPS")
def test_missing_mps_is_named():
    with pytest.raises(ParameterError, match="'mps': Apple MPS is not available"):
        select_device("mps")


def test_cpu_runs_in_float32_and_reports_memory():
    assert default_dtype("cpu") is torch.float32
    assert free_memory_bytes("cpu") > 0


def test_batch_size_follows_memory_and_caps():
    assert 1 <= suggest_batch_size("cpu", 1_000_000) <= 8  # the CPU gains nothing from wide batches
    assert suggest_batch_size("cpu", 1_000_000, cap=2) <= 2
    assert suggest_batch_size("cpu", 10**18) == 1  # never zero
    with pytest.raises(ParameterError, match=r"bytes_per_item \(0\)"):
        suggest_batch_size("cpu", 0)
    with pytest.raises(ParameterError, match=r"cap \(0\)"):
        suggest_batch_size("cpu", 10, cap=0)


def _oom_above(limit: int, calls: list[int], error: BaseException | None = None):
    def fn(batch):
        calls.append(len(batch))
        if len(batch) > limit:
            raise error if error is not None else torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")
        return [x * 10 for x in batch]

    return fn


def test_run_batched_keeps_order_and_reports_progress():
    seen = []
    out = run_batched(lambda b: [x + 1 for x in b], list(range(10)), 4, progress=lambda d, t: seen.append((d, t)))
    assert out == list(range(1, 11))
    assert seen == [(4, 10), (8, 10), (10, 10)]
    assert run_batched(lambda b: b, [], 4) == []


def test_out_of_memory_halves_the_batch_and_retries_the_same_items(caplog):
    calls: list[int] = []
    halved: list[int] = []
    with caplog.at_level("WARNING", logger="backend.models.devices"):
        out = run_batched(_oom_above(2, calls), list(range(9)), 8, on_oom=halved.append)
    assert out == [x * 10 for x in range(9)]
    assert halved == [4, 2]
    assert calls == [8, 4, 2, 2, 2, 2, 1]  # the smaller size is kept for the rest
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        "out of memory at a batch of 8", "out of memory at a batch of 4"]  # each retry said in the log


def test_runtime_error_out_of_memory_counts_too():
    # MPS and older CUDA builds raise RuntimeError rather than torch.OutOfMemoryError.
    calls: list[int] = []
    err = RuntimeError("MPS backend out of memory (MPS allocated: 1 GB)")
    assert run_batched(_oom_above(1, calls, err), [1, 2, 3], 3) == [10, 20, 30]
    assert is_out_of_memory(err) and not is_out_of_memory(RuntimeError("shape mismatch"))
    assert is_out_of_memory(
        RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")
    )


def test_out_of_memory_at_batch_size_one_is_a_model_error():
    calls: list[int] = []
    with pytest.raises(ModelError, match="out of memory even at batch size 1") as e:
        run_batched(_oom_above(0, calls), [1, 2], 2)
    assert calls == [2, 1]
    assert "\n" not in str(e.value)


def test_other_errors_and_cancellation_propagate():
    with pytest.raises(ValueError, match="boom"):
        run_batched(_oom_above(0, [], ValueError("boom")), [1], 1)

    def cancel(done, total):
        raise Cancelled("cancelled")

    with pytest.raises(Cancelled):
        run_batched(lambda b: b, [1, 2, 3], 1, progress=cancel)
    with pytest.raises(ModelError, match="a batch of 2 items gave 1 results"):
        run_batched(lambda b: b[:1], [1, 2], 2)
    with pytest.raises(ParameterError, match=r"batch_size \(0\)"):
        run_batched(lambda b: b, [1], 0)


@pytest.mark.parametrize(("value", "expected"), [("1", 1), (" 3 ", 3), ("", "default"), ("0", "default"), ("-2", "default"), ("two", "default")])
def test_torch_threads_variable(monkeypatch, value, expected) -> None:
    monkeypatch.setenv("CHUNKLAB_TORCH_THREADS", value)
    assert torch_threads() == (default_torch_threads() if expected == "default" else expected)


@pytest.mark.parametrize(("cores", "expected"), [(1, 1), (2, 1), (3, 1), (4, 2), (16, 8)])
def test_the_default_thread_count_is_half_the_usable_cores(monkeypatch, cores, expected) -> None:
    monkeypatch.delenv("CHUNKLAB_TORCH_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert torch_threads() == expected


def test_apply_thread_setting_applies_the_count_once_unless_it_changes(monkeypatch) -> None:
    before = torch.get_num_threads()
    monkeypatch.setattr(devices, "_threads_applied", None)  # a fresh process
    try:
        monkeypatch.delenv("CHUNKLAB_TORCH_THREADS", raising=False)
        assert devices.apply_thread_setting() == default_torch_threads() == torch.get_num_threads()
        torch.set_num_threads(3)  # a script's own choice, made after the first model loaded
        assert devices.apply_thread_setting() == 3  # not undone by the next model load
        monkeypatch.setenv("CHUNKLAB_TORCH_THREADS", "2")
        assert devices.apply_thread_setting() == 2 == torch.get_num_threads()  # a new setting applies
    finally:
        torch.set_num_threads(before)
