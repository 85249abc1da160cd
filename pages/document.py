"""Document page: pick or upload a document, see its figures and read it."""

import streamlit as st

from backend.figures.text import STYLE, text_html
from backend.lab.document import preview, preview_count
from components.cached import document_stats, samples
from components.documents import current_sample, load_bundled_sample, load_upload, upload_limit_mb, upload_types
from components.keys import DOCUMENT
from components.layout import ensure_routed, landing_intro
from components.retrieval import md_text
from components.state import current_document

ensure_routed()

_ERROR = DOCUMENT("error")
_LAST_UPLOAD = DOCUMENT("last_upload")
_UPLOAD_GEN = DOCUMENT("upload_gen")  # the uploader's key is DOCUMENT(f"upload_{generation}"), see below

landing_intro()
st.header("Document", anchor=False)
st.caption("Choose the document to chunk: upload your own or start from a bundled sample.")

col_upload, col_sample = st.columns(2, gap="large")

with col_upload:
    types = upload_types()
    uploaded = st.file_uploader(
        "Upload a document",
        type=types,
        key=DOCUMENT(f"upload_{st.session_state.get(_UPLOAD_GEN, 0)}"),
        max_upload_size=upload_limit_mb(),
        help=(
            "PDF (with a text layer), Word (.docx), HTML, Markdown or plain text, up to "
            f"{upload_limit_mb()} MB (`CHUNKLAB_MAX_FILE_MB`). The text is extracted and normalized; "
            "every offset in the app indexes that text."
        ),
    )
    if uploaded is not None and uploaded.file_id != st.session_state.get(_LAST_UPLOAD):
        # Read each upload once, not on every rerun while it sits in the uploader.
        st.session_state[_LAST_UPLOAD] = uploaded.file_id
        with st.spinner(f"Reading {md_text(uploaded.name)}…", show_time=True):  # a file name is user input
            st.session_state[_ERROR] = load_upload(uploaded.getvalue(), uploaded.name)
        if st.session_state[_ERROR] is not None:
            # Rejected: a new, empty uploader, so the box no longer names a file that is not the document
            # (its one-line error stays until the next upload or sample).
            st.session_state[_UPLOAD_GEN] = st.session_state.get(_UPLOAD_GEN, 0) + 1
        # Again: the router drew the sidebar before this run loaded the new document (or the uploader was replaced).
        st.rerun()

with col_sample:
    bundled = {s.name: s for s in samples()}
    if bundled:
        with st.container(horizontal=True, vertical_alignment="bottom"):
            choice = st.selectbox(
                "Or open a bundled sample",
                list(bundled),
                format_func=lambda n: bundled[n].title,
                key=DOCUMENT("sample"),
                persist_state="session",
            )
            if st.button("Open sample", key=DOCUMENT("open_sample"), icon=":material/folder_open:"):
                with st.spinner(f"Opening {bundled[choice].title}…", show_time=True):
                    st.session_state[_ERROR] = load_bundled_sample(choice)
                if st.session_state[_ERROR] is None:
                    st.rerun()
    else:
        st.caption("No bundled samples are installed.")

if st.session_state.get(_ERROR):
    st.error(st.session_state[_ERROR], icon=":material/error:")

doc = current_document()
if doc is None:
    st.info("No document loaded yet: upload a file or open a sample.", icon=":material/info:")
    st.stop()

st.subheader(md_text(doc.source), anchor=False)  # a file name is user input: no Markdown, no HTML
sample = current_sample()
if sample is not None:  # an upload gets no sample's description
    st.caption(sample.description)
with st.spinner("Counting tokens and sentences…", show_time=True):
    stats = document_stats(doc, doc.id)

row1 = st.columns(4)
row1[0].metric("Characters", f"{stats['characters']:,}", border=True)
row1[1].metric("Tokens", f"{stats['tokens']:,}", help="cl100k_base (OpenAI) tokens", border=True)
row1[2].metric("Sentences", f"{stats['sentences']:,}", border=True)
row1[3].metric("Paragraphs", f"{stats['paragraphs']:,}", border=True)
row2 = st.columns(4)
row2[0].metric("Pages", f"{stats['pages']:,}", border=True)
row2[1].metric("Language", stats["language"], help="Detected language code (und: undetermined)", border=True)
row2[2].metric("Format", stats["kind"].upper(), border=True)
row2[3].metric("Encoding", stats["encoding"] or "—", help="Detected text encoding (text formats)", border=True)

st.subheader("Text", anchor=False)
# Paged documents (PDF) are read page by page; others by windows of PREVIEW_CHARS characters.
if st.session_state.get(DOCUMENT("preview_doc")) != doc.id:
    st.session_state[DOCUMENT("preview_doc")] = doc.id
    st.session_state.pop(DOCUMENT("preview_page"), None)  # back to the first page
count = preview_count(doc)
if st.session_state.get(DOCUMENT("preview_page"), 1) > count:
    st.session_state[DOCUMENT("preview_page")] = count

nav, where = st.columns([3, 2], vertical_alignment="center")
with nav:
    number = st.pagination(count, key=DOCUMENT("preview_page"), persist_state="session", max_visible_pages=11)
part = preview(doc, number)
with where:
    st.caption(part.caption(len(doc.text)))
with st.container(height=520, border=True, key=DOCUMENT("preview")):
    st.html(STYLE + text_html(doc.text[part.start : part.end]))
