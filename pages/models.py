"""Models page: choose the language model and the embedder, score the document, manage the cache."""

import streamlit as st

from backend.figures.text import esc
from backend.lab.document import plan_sentence_scores
from backend.models.cache import default_cache
from backend.models.devices import PRECISIONS, default_precision
from components.keys import CHAT_CHOICE, CHAT_KEY, MODELS
from components.layout import ensure_routed
from components.lm_runs import start_plan
from components.models import (
    chat_label,
    job_progress,
    load_embedding_model,
    load_language_model,
    load_remote_model,
    model_card,
    model_in_use,
    score_results,
    scorer_in_use,
)
from components.state import current_document

ensure_routed()

_LM_ERROR = MODELS("lm_error")
_EMB_ERROR = MODELS("emb_error")
_JOB = MODELS("score_job")
_CACHE_NOTE = MODELS("cache_note")
LM_SOURCES = {
    "bundled": "Bundled SmolLM2-135M",
    "local": "Local path or hub id",
    "remote": "Remote (OpenAI-compatible)",
}
EMB_SOURCES = {"bundled": "Bundled all-MiniLM-L6-v2", "local": "Local path or hub id", "remote": "Embeddings server"}
_BY_A_JOB = "The default model, loaded by a background job (not chosen here): pages use it until you load another."
_NO_LM = (
    "No language model is loaded: press Load under Language model above (the bundled SmolLM2 takes about "
    "half a minute the first time), or run a job that needs it."
)


def _card(kind: str, key: str) -> None:
    info, chosen = model_in_use(kind)
    model_card(info, key=key, note=None if chosen else _BY_A_JOB)


st.title("Models")
st.caption(
    "The language model scores text (perplexity); the embedder turns text into vectors. "
    "Models load once per server and are shared by every session; a remote server and its key stay in yours."
)

col_lm, col_emb = st.columns(2, gap="large")

# --- language model ---------------------------------------------------------------------------
with col_lm:
    st.subheader("Language model", anchor=False)
    source = st.radio(
        "Source", list(LM_SOURCES), format_func=LM_SOURCES.get, key=MODELS("lm_source"),
        horizontal=True, persist_state="session",
    )
    with st.form(MODELS("lm_form"), border=False):
        if source == "local":
            st.text_input(
                "Model", key=MODELS("lm_path"), persist_state="session",
                placeholder="/path/to/checkpoint, /path/to/model.gguf or org/name",
                help="A transformers checkpoint folder, a .gguf file, or a Hugging Face hub id "
                "(only where the hub is reachable or the model is already in its local cache).",
            )
        elif source == "remote":
            st.text_input(
                "Base URL", key=MODELS("remote_url"), persist_state="session",
                placeholder="http://gpu-box:8000/v1",
                help="An OpenAI-compatible server that returns prompt log-probs (vLLM does). "
                "Empty: CHUNKLAB_REMOTE_BASE_URL.",
            )
            st.text_input(
                "Model name", key=MODELS("remote_model"), persist_state="session",
                placeholder="the server's only model", help="Empty: CHUNKLAB_REMOTE_MODEL, else the server's only model.",
            )
            # Not persisted: the key lives in this widget and in the connected scorer, nowhere else.
            st.text_input(
                "API key", key=MODELS("remote_key"), type="password", autocomplete="off",
                help="Sent as a bearer token. Kept only in this browser session; never saved, logged or cached. "
                "Empty: CHUNKLAB_REMOTE_API_KEY.",
            )
        if source != "remote":
            st.selectbox(
                "Precision", PRECISIONS, key=MODELS("lm_precision"), persist_state="session",
                index=PRECISIONS.index(default_precision()),
                help="float32: the reference. float16: the decoder's matmuls in float16 (norms, attention and head "
                "in float32); a sentence's mean NLL within 0.02 nats of float32, same PPL boundaries on the samples. "
                "bfloat16: the matmuls under bfloat16 autocast, within 0.15 nats (boundaries may move), faster only on "
                "some CPUs. auto: float16 where measured at least 1.1x faster on this machine, else float32. "
                "On a GPU the whole model runs in the precision chosen (auto: bfloat16, or float16). "
                "This session only; outputs are cached per precision and device kind.",
            )
        load_lm = st.form_submit_button(
            "Connect" if source == "remote" else "Load", key=MODELS("lm_load"), icon=":material/download:"
        )
    if load_lm:
        with st.spinner("Loading the language model…", show_time=True):
            if source == "remote":
                st.session_state[_LM_ERROR] = load_remote_model(
                    st.session_state.get(MODELS("remote_url")) or "",
                    st.session_state.get(MODELS("remote_model")) or "",
                    st.session_state.get(MODELS("remote_key")) or "",
                )
            else:
                spec = st.session_state.get(MODELS("lm_path")) if source == "local" else None
                if source == "local" and not (spec or "").strip():
                    st.session_state[_LM_ERROR] = "enter a model folder, a .gguf file or a hub id"
                else:
                    st.session_state[_LM_ERROR] = load_language_model(
                        spec, st.session_state.get(MODELS("lm_precision")) or default_precision()
                    )
        if st.session_state[_LM_ERROR] is None:
            st.rerun()  # the router drew the sidebar before this model was loaded
    if st.session_state.get(_LM_ERROR):
        st.error(st.session_state[_LM_ERROR], icon=":material/error:")
    _card("lm", MODELS("lm_card"))

# --- embedder ----------------------------------------------------------------------------------
with col_emb:
    st.subheader("Embedder", anchor=False)
    emb_source = st.radio(
        "Source", list(EMB_SOURCES), format_func=EMB_SOURCES.get, key=MODELS("emb_source"),
        horizontal=True, persist_state="session",
    )
    with st.form(MODELS("emb_form"), border=False):
        if emb_source == "local":
            st.text_input(
                "Model", key=MODELS("emb_path"), persist_state="session",
                placeholder="/path/to/sentence-transformers-folder or org/name",
                help="A sentence-transformers folder, a plain transformers folder (mean pooling), "
                "or a Hugging Face hub id (only where the hub is reachable or the model is cached).",
            )
        if emb_source == "remote":
            st.text_input(
                "Server URL", key=MODELS("emb_url"), persist_state="session",
                placeholder="http://host:8080/v1 (blank: CHUNKLAB_EMBEDDER_BASE_URL)",
                help="Any OpenAI-compatible /v1/embeddings (OpenAI, Text Embeddings Inference, Ollama, vLLM, "
                "llama.cpp with --embeddings). Model, key, batch, concurrency and dimensions come from the "
                "CHUNKLAB_EMBEDDER_* variables (see the docs: Remote embeddings); vectors are cached under the model the server serves.",
            )
        load_emb = st.form_submit_button("Load", key=MODELS("emb_load"), icon=":material/download:")
    if load_emb:
        spec = st.session_state.get(MODELS("emb_path")) if emb_source == "local" else None
        if emb_source == "remote":
            spec = (st.session_state.get(MODELS("emb_url")) or "").strip() or "remote"
        with st.spinner("Loading the embedder…", show_time=True):
            if emb_source == "local" and not (spec or "").strip():
                st.session_state[_EMB_ERROR] = "enter a model folder or a hub id"
            else:
                st.session_state[_EMB_ERROR] = load_embedding_model(spec)
        if st.session_state[_EMB_ERROR] is None:
            st.rerun()
    if st.session_state.get(_EMB_ERROR):
        st.error(st.session_state[_EMB_ERROR], icon=":material/error:")
    _card("embedder", MODELS("emb_card"))

# --- chat model (LLM chunkers) -------------------------------------------------------------------
st.divider()
st.subheader("Chat model", anchor=False)
st.caption(
    "What the LLM chunkers (llm_split, lumber, moc) ask. Their answers are cached per model, so a "
    "rerun costs nothing; the API key is kept only in this browser session, never saved or shown."
)
CHAT_SOURCES = {"default": "Default", "local": "Bundled model", "remote": "OpenAI-compatible API"}
chat_source = st.radio(
    "Source", list(CHAT_SOURCES), format_func=CHAT_SOURCES.get, key=MODELS("chat_source"),
    horizontal=True, persist_state="session",
    help="Default: the API when OPENAI_BASE_URL or OPENAI_API_KEY is set, else the bundled model.",
)
with st.form(MODELS("chat_form"), border=False):
    if chat_source == "remote":
        left, mid, right = st.columns(3)
        left.text_input("Base URL", key=MODELS("chat_url"), persist_state="session",
                        placeholder="http://gpu-box:8000/v1", help="Empty: OPENAI_BASE_URL, else OpenAI's API.")
        mid.text_input("Model name", key=MODELS("chat_model"), persist_state="session",
                       placeholder="e.g. Qwen2.5-1.5B-Instruct", help="Required: it names the cached answers.")
        # Not persisted: the key lives in this widget and in the session's chat model only.
        right.text_input("API key", key=MODELS("chat_key_input"), type="password", autocomplete="off",
                         help="Sent as a bearer token; empty: OPENAI_API_KEY.")
    use_chat = st.form_submit_button("Use", key=MODELS("chat_use"), icon=":material/check:")
if use_chat:
    model = (st.session_state.get(MODELS("chat_model")) or "").strip()
    if chat_source == "remote" and not model:
        st.error("enter the model name the server serves", icon=":material/error:")
    else:
        if chat_source == "default":
            st.session_state.pop(CHAT_CHOICE, None)
        elif chat_source == "local":
            st.session_state[CHAT_CHOICE] = ("local", None)
        else:
            st.session_state[CHAT_CHOICE] = ("remote", ((st.session_state.get(MODELS("chat_url")) or "").strip(), model))
            st.session_state[CHAT_KEY] = st.session_state.get(MODELS("chat_key_input")) or ""
        st.rerun()  # the router drew the sidebar before this choice
st.caption(f"LLM chunkers use: {esc(chat_label())}")

# --- scoring the current document ----------------------------------------------------------------
st.divider()
st.subheader("Score the current document", anchor=False)
st.caption(
    "Per-sentence perplexity under the language model: one pass over the whole text, each token "
    "given the text before it. Results are cached on disk, so scoring the same text again is instant."
)
doc = current_document()
job = st.session_state.get(_JOB)
scorer = scorer_in_use()  # the session's model, else the default once a job has loaded it
if doc is None:
    st.info("Load a document first.", icon=":material/info:")
elif job is not None and job.running:
    job_progress(_JOB, MODELS("score_cancel"))
else:
    plan = plan_sentence_scores(doc, scorer, default_cache()) if scorer is not None else None
    if st.button(
        "Score the current document", key=MODELS("score"), icon=":material/play_arrow:", type="primary",
        disabled=plan is None, help=None if plan is not None else _NO_LM,
    ):
        job = st.session_state[_JOB] = start_plan(plan)
        st.rerun()  # draw the progress view
    if plan is None:
        st.caption(_NO_LM)  # a disabled button's tooltip may never show: say why beside it
    if job is not None and plan is not None and job.meta.get("signature") == plan.signature:
        if job.state == "cancelled":
            st.warning("Scoring was cancelled.", icon=":material/stop_circle:")
        elif job.state == "failed":
            st.error(job.error, icon=":material/error:")
        elif job.state == "done":
            score_results(job.result, job.seconds)

# --- the output cache ----------------------------------------------------------------------------
st.divider()
st.subheader("Output cache", anchor=False)
cache = default_cache()
stats = cache.stats()
if cache.problem is not None:
    st.warning(f"{cache.problem[0].upper()}{cache.problem[1:]}: everything works, but each result is computed again.",
               icon=":material/warning:")
_MIB = 1024 * 1024  # CHUNKLAB_CACHE_MAX_MB counts MB of 1024 × 1024 bytes: the limit shows as it was set
cols = st.columns([1, 1, 1, 3], vertical_alignment="bottom")
cols[0].metric("Entries", f"{stats['entries']:,}", border=True)
cols[1].metric("Size", f"{stats['bytes'] / _MIB:,.1f} MB", border=True)
cols[2].metric(
    "Limit", f"{stats['max_bytes'] / _MIB:,.0f} MB", border=True,
    help="CHUNKLAB_CACHE_MAX_MB. Past it, the least recently used entries are deleted.",
)
with cols[3]:
    st.caption("Directory")
    st.code(stats["directory"], language=None)
    if st.button("Clear cache", key=MODELS("clear_cache"), icon=":material/delete:",
                 help="Delete every cached model output (token scores, pair scores). Loaded models stay loaded."):
        removed = cache.clear()
        st.session_state[_CACHE_NOTE] = f"Removed {removed:,} cached entr{'y' if removed == 1 else 'ies'}."
        st.rerun()
# A caption, not st.progress: a progress bar on the page reads as "still working" (to users and to the browser tests).
st.caption(
    f"{stats['bytes'] / _MIB:,.1f} MB of {stats['max_bytes'] / _MIB:,.0f} MB used "
    f"({stats['bytes'] / stats['max_bytes']:.0%}); past the limit the least recently used entries are deleted."
)
if st.session_state.get(_CACHE_NOTE):
    st.success(st.session_state.pop(_CACHE_NOTE), icon=":material/check:")
