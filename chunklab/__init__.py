"""Chunk Lab as a library: load a document, build a chunker from a spec string, chunk, evaluate, score.

    import chunklab

    doc = chunklab.load("report.pdf")                       # a path, bytes (name=…), or from_text("…")
    chunker = chunklab.Chunker("recursive chunk_size=200")  # the spec the app and the CLI show
    for c in chunker.chunk(doc):
        print(c.start, c.end, c.tokens, c.page, c.text[:40])

    ppl = chunklab.Chunker("ppl threshold=0.4")              # loads SmolLM2 once, on first use
    result = chunklab.evaluate(ppl, "sample:narrative")      # recall, precision, IoU (models extra)
    report = chunklab.metrics(ppl.chunk(doc), ["bc", "cs"], chunker=ppl)

``pip install "chunk-lab[core]"`` is enough for the model-free chunkers (no torch, no
Streamlit); ``[models]`` adds the model-backed chunkers, ``evaluate`` and ``metrics``. The
LangChain and LlamaIndex bridges are in :mod:`chunklab.integrations`. Everything named in
``__all__`` follows semantic versioning (CHANGELOG.md); ``backend`` is the implementation.
"""

from chunklab.chunking import Chunk, Chunker, Chunking, chunk, chunker, chunkers
from chunklab.documents import Document, from_text, load
from chunklab.errors import ChunkLabError, InputError, ModelError, ParameterError
from chunklab.evaluation import evaluate, metrics, questions
from chunklab.version import __version__

__all__ = [
    "__version__",
    "Document",
    "load",
    "from_text",
    "Chunk",
    "Chunking",
    "Chunker",
    "chunker",
    "chunk",
    "chunkers",
    "evaluate",
    "metrics",
    "questions",
    "ChunkLabError",
    "InputError",
    "ModelError",
    "ParameterError",
]

