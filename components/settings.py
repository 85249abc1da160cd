"""The session's page settings: one session-state key per setting of :mod:`backend.lab.settings`, read and written here.

A setting lives under the key ``<page prefix>_<name>`` (``qual_K``, ``ppl_threshold``…). Its
widget uses that key with ``persist_state="session"``, so leaving a page and coming back, or
saving the session from any page, keeps it; and it takes no ``value=``/``default=``:
:func:`prepare` puts the setting's default (or the restored value) in place before the widget
exists, which is the one way Streamlit accepts both a default and values set by code (a
restored session, a click on a chart) without a warning. Other pages read a setting with
:func:`get`, which falls back to the default when the value is missing or invalid.
"""

from __future__ import annotations

from typing import Any, Mapping

import streamlit as st

from backend.lab.settings import Setting, iter_settings, setting
from components.keys import BENCHMARK, COMPARE, PPL, QUALITY, RETRIEVAL, SUMMARY, PageKeys

__all__ = ["setting_key", "spec", "get", "put", "prepare", "section_values", "capture", "restore"]

_PAGES: dict[str, PageKeys] = {  # every section of backend.lab.settings (tests/app/test_settings_keys.py checks it)
    "quality": QUALITY,
    "ppl": PPL,
    "compare": COMPARE,
    "retrieval": RETRIEVAL,
    "benchmark": BENCHMARK,
    "summary": SUMMARY,
}


def setting_key(section: str, name: str) -> str:
    """The session-state key (and widget key) of ``section.name``."""
    setting(section, name)  # an unknown setting fails here, not as a silently unused key
    return _PAGES[section](name)


def spec(section: str, name: str) -> Setting:
    """The setting's type, default, range or choices and help (:func:`backend.lab.settings.setting`)."""
    return setting(section, name)


def get(section: str, name: str) -> Any:
    """The setting's value in this session, else its default (a value it would refuse counts as missing)."""
    found = setting(section, name)
    value = st.session_state.get(_PAGES[section](name))
    return value if value is not None and found.valid(value) else found.default


def put(section: str, name: str, value: Any) -> None:
    """Set ``section.name`` (before its widget is drawn in this run, or from a widget's callback).

    Raises:
        ParameterError: a value the setting refuses.
    """
    st.session_state[setting_key(section, name)] = setting(section, name).check(value)


def prepare(section: str, name: str) -> str:
    """The widget key of ``section.name``, with the session's value (else the default) in place for its widget.

    A valid value is written back under the key, so the widget draws it even when its widget id
    is not the one that set it: a rerun that a page asks for mid-run (``st.rerun`` when a job
    ends) may register the widget under another id, which would start from the widget's own
    default (an empty metric list on Quality) and lose the user's choice.
    """
    key = setting_key(section, name)
    found = setting(section, name)
    value = st.session_state.get(key)
    if value is not None and found.valid(value):
        st.session_state[key] = value
    elif found.default is None:
        st.session_state.pop(key, None)
    else:
        st.session_state[key] = found.default
    return key


def section_values(section: str) -> dict[str, Any]:
    """Every setting of one page as this session holds it (defaults where it holds none)."""
    return {s.name: get(section, s.name) for s in iter_settings() if s.section == section}


def capture() -> dict[str, dict[str, Any]]:
    """The settings this session has a valid value for, by section (what a saved session writes)."""
    out: dict[str, dict[str, Any]] = {}
    for s in iter_settings():
        value = st.session_state.get(_PAGES[s.section](s.name))
        if value is not None and s.valid(value):
            out.setdefault(s.section, {})[s.name] = s.check(value)
    return out


def restore(values: Mapping[str, Mapping[str, Any]]) -> None:
    """Put checked settings (:func:`backend.lab.settings.checked_settings`) into the session."""
    for section, group in values.items():
        for name, value in group.items():
            st.session_state[setting_key(section, name)] = value
