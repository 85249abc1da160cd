"""A one-panel app for the AppTest of components/edit_metrics.py: the session's document, a base and its edited copy.

The test puts ``doc``, ``edit_test_base`` and ``edit_test_edited`` (ConfigEntry) in the session;
this script chunks both (no model: the chunkers are rule-based) and draws the panel once, as
the Edit page does.
"""

import streamlit as st

from backend.chunkers import run_chunker
from components.edit_metrics import edit_metrics_panel

doc = st.session_state["doc"]
base_entry = st.session_state["edit_test_base"]
edited_entry = st.session_state["edit_test_edited"]
edit_metrics_panel(doc, base_entry, run_chunker(doc, base_entry.config), edited_entry,
                   run_chunker(doc, edited_entry.config))
