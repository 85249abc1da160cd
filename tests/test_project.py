"""pyproject.toml lists the same pinned dependencies as the requirements files the README's commands install."""

from __future__ import annotations

import tomllib

from tests.conftest import ROOT


def _pins(name: str) -> set[str]:
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
    return {line.split("#")[0].strip() for line in lines if line.split("#")[0].strip() and not line.startswith("-r")}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _extra(name: str) -> set[str]:
    """An extra's pins, with the extras it names (``chunk-lab[models]``) expanded."""
    project = _project()["project"]
    out: set[str] = set()
    for req in project["optional-dependencies"][name]:
        if req.startswith("chunk-lab["):
            for inner in req[len("chunk-lab[") : -1].split(","):
                out |= _extra(inner)
        else:
            out.add(req)
    return out


def test_base_and_extras_match_requirements_txt():
    # core (the base install) + models + app + ray is the app's pinned install, requirements.txt, exactly.
    base = set(_project()["project"]["dependencies"])
    assert base | _extra("models") | _extra("app") | _extra("ray") == _pins("requirements.txt")


def test_core_is_requirements_core_txt():
    assert set(_project()["project"]["dependencies"]) == _pins("requirements-core.txt")


def test_core_installs_no_torch_streamlit_or_chroma():
    base = {req.split("==")[0] for req in _project()["project"]["dependencies"]}
    assert not base & {"torch", "streamlit", "transformers", "sentence-transformers", "chromadb", "plotly", "pandas"}
    assert _extra("core") == set()


def test_all_is_every_extra_but_test():
    extras = _project()["project"]["optional-dependencies"]
    names = set(extras) - {"all", "test", "core"}
    assert _extra("all") == set().union(*(_extra(n) for n in names))


def test_the_bridges_extras_pin_what_the_tests_run():
    assert _extra("langchain") | _extra("llamaindex") <= _pins("requirements-dev.txt")


def test_test_extras_match_requirements_dev_txt():
    assert set(_project()["project"]["optional-dependencies"]["test"]) == _pins("requirements-dev.txt")


def test_packages_are_the_importable_layers():
    assert _project()["tool"]["setuptools"]["packages"]["find"]["include"] == ["backend*", "components*", "chunklab*"]
    assert _project()["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]


def test_test_files_have_unique_basenames():
    """pytest's default (rootdir) import mode cannot collect two test modules of the same name."""
    names = [path.name for path in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({name for name in names if names.count(name) > 1}) == []
