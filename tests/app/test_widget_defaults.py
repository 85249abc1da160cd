"""No widget both takes a default and has its value set through Session State (issue 23's log warning).

Streamlit logs "The widget with key … was created with a default value but also had its value set
via the Session State API", with a 30-line stack, when a widget gets ``value=``/``default=``/
``index=`` and its key was written by code in the same run. A setting's widget takes its key from
:func:`components.settings.prepare`, which writes the default (or a restored value) there, so such
a widget must take no default of its own: that is what once logged the warning for
``cmp_show_strip`` (``value=True``) and ``bm_source`` (``default=``). The browser test
``test_e2e_layout.py`` reads the server's log; this one reads every page and component.
"""

from __future__ import annotations

import ast

from tests.conftest import ROOT

DEFAULTS = {"value", "default", "index"}


def _prepared_widgets_with_a_default() -> list[str]:
    found = []
    for folder in ("pages", "components"):
        for path in sorted((ROOT / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call):
                    continue
                keys = {k.arg: k.value for k in node.keywords}
                key = keys.get("key")
                prepared = isinstance(key, ast.Call) and getattr(key.func, "id", getattr(key.func, "attr", "")) == "prepare"
                if prepared and DEFAULTS & set(keys):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {sorted(DEFAULTS & set(keys))}")
    return found


def test_no_setting_widget_takes_a_default_of_its_own() -> None:
    assert _prepared_widgets_with_a_default() == []


def test_the_check_sees_a_default_beside_prepare(tmp_path, monkeypatch) -> None:
    import tests.app.test_widget_defaults as me

    fake = tmp_path / "pages"
    fake.mkdir()
    (tmp_path / "components").mkdir()
    (fake / "p.py").write_text('st.toggle("Show strip", value=True, key=prepare("compare", "show_strip"))\n')
    monkeypatch.setattr(me, "ROOT", tmp_path)
    assert me._prepared_widgets_with_a_default() == ["pages/p.py:1 ['value']"]
