"""Replace a function for a test everywhere the project holds it, not only in the module that defines it.

Project modules import what they use at their top (``from backend.models.scorer import load_scorer``), so
each holds its own binding of the function: patching the defining module alone would leave those untouched,
and a guard such as "no model is loaded" would pass without guarding anything.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest

__all__ = ["patch_everywhere"]

_PROJECT = ("backend", "components", "pages", "tests")


def patch_everywhere(monkeypatch: pytest.MonkeyPatch, target: str, value: Any) -> None:
    """Set ``target`` (``package.module.name``) to ``value`` there and in every loaded project module bound to it.

    Modules imported later bind the patched value themselves (they read the defining module's attribute).
    """
    module_name, name = target.rsplit(".", 1)
    module = importlib.import_module(module_name)
    original = getattr(module, name)
    monkeypatch.setattr(module, name, value)
    for other in list(sys.modules.values()):
        if other is None or other is module or not getattr(other, "__name__", "").startswith(_PROJECT):
            continue
        for attr, obj in list(vars(other).items()):
            if obj is original:
                monkeypatch.setattr(other, attr, value)
