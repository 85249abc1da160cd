"""Every page setting has one session key, and a value set from code needs no widget default."""

from __future__ import annotations

from backend.lab.settings import SECTIONS, iter_settings
from components.settings import setting_key


def test_every_section_has_a_page_prefix_and_keys_are_distinct() -> None:
    keys = [setting_key(s.section, s.name) for s in iter_settings()]
    assert len(set(keys)) == len(keys)
    assert {setting_key(section, next(s.name for s in iter_settings() if s.section == section)).split("_")[0]
            for section in SECTIONS} == {"qual", "ppl", "cmp", "ret", "bm", "sum"}
    assert setting_key("quality", "K") == "qual_K" and setting_key("ppl", "threshold") == "ppl_threshold"
