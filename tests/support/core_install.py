"""A core install of this checkout: the wheel built from a copy of the sources, installed ``[core]`` into a fresh venv.

Offline: every dependency comes from ``.venv/wheelhouse``, the core wheels ``scripts/setup.sh`` keeps,
never from a package index, so a dependency missing from the core list fails the install. Used by
``tests/chunklab/test_install.py`` and ``bench/bench_library.py``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = ROOT / ".venv" / "wheelhouse"
SOURCES = ("backend", "chunklab", "components")  # the packages pyproject.toml ships


def _pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"pip {args[0]} failed: {done.stderr.strip()[-2000:]}")


def core_install(base: Path, *, compile_bytecode: bool = False) -> tuple[Path, Path]:
    """``(the venv's python, the wheel)``, both under ``base`` (an empty folder).

    ``compile_bytecode`` writes the ``.pyc`` files at install time, as pip does by default (the test
    skips it: it saves seconds; an import-time measurement needs it, since imports under
    ``PYTHONDONTWRITEBYTECODE`` would compile every module every time).

    Raises:
        FileNotFoundError: the wheelhouse holds no core wheels (``scripts/setup.sh requirements-dev.txt`` makes it).
        RuntimeError: building or installing failed (pip's last lines).
    """
    if not any(WHEELHOUSE.glob("numpy-*.whl")):
        raise FileNotFoundError(f"{WHEELHOUSE} holds no core wheels: run scripts/setup.sh requirements-dev.txt")
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for package in SOURCES:
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(base / "dist"), str(src))
    wheel = next((base / "dist").glob("chunk_lab-*.whl"))
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    compiling = () if compile_bytecode else ("--no-compile",)
    _pip("--python", str(python), "install", "--no-index", "--find-links", str(WHEELHOUSE), *compiling, f"{wheel}[core]")
    return python, wheel
