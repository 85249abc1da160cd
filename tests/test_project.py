"""pyproject.toml lists the same pinned dependencies as the requirements files the README's commands install."""

from __future__ import annotations

import tomllib

from tests.conftest import ROOT


def _pins(name: str) -> set[str]:
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
    return {line.split("#")[0].strip() for line in lines if line.split("#")[0].strip() and not line.startswith("-r")}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_dependencies_match_requirements_txt():
    assert set(_project()["project"]["dependencies"]) == _pins("requirements.txt")


def test_test_extras_match_requirements_dev_txt():
    assert set(_project()["project"]["optional-dependencies"]["test"]) == _pins("requirements-dev.txt")


def test_packages_are_the_importable_layers():
    assert _project()["tool"]["setuptools"]["packages"]["find"]["include"] == ["backend*", "components*"]
    assert _project()["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]


def test_test_files_have_unique_basenames():
    """pytest's default (rootdir) import mode cannot collect two test modules of the same name."""
    names = [path.name for path in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({name for name in names if names.count(name) > 1}) == []
