"""The retrieval lab's subcommands of ``python -m backend`` (wired in by :mod:`backend.cli.main`).

Subcommands:
    eval --questions FILE.csv|sample:NAME [--corpora DIR] --chunker NAME [--param k=v …] [--tokenizer T]
         [--embedder default|PATH] [--retrieve 5] [--chunk-spans reference|exact] [--json]
                The Chroma report's metrics of one configuration on a Chroma-format question
                set. ``--json`` prints ``{"recall_mean", "recall_std", "precision_mean",
                "precision_std", "precision_omega_mean", "precision_omega_std", "iou_mean",
                "iou_std", "per_corpus": {…}, "chunks", "seconds"}`` (fractions in 0..1);
                without it, a short text summary. ``--retrieve -1``: as many chunks as contain
                excerpts (the reference's mode). ``--corpora`` defaults to ``corpora/`` beside
                the CSV; ``sample:NAME`` is a bundled sample's question set (``narrative``,
                ``technical``: ``backend.samples.list_question_sets``) and needs no corpora.
                ``--chunk-spans exact`` scores chunks on the chunker's own spans instead of
                where the reference's chunk search places them (a trailing ``.`` dropped,
                the first occurrence of repeated text; the default, as the reference scores).
    questions generate FILE --out DIR [--n 10] [--base-url URL] [--model NAME] [--local]
                Generate a question set from a document (an OpenAI-compatible LLM when
                OPENAI_BASE_URL/OPENAI_API_KEY or --base-url is set, else the weaker local
                fallback) and write ``DIR/questions.csv`` and ``DIR/corpora/<corpus_id>.md``;
                prints a JSON summary. The API key is read from OPENAI_API_KEY only.
    questions check --questions FILE.csv|sample:NAME [--corpora DIR]
                Validate a question set; prints ``{"questions", "corpora"}``.
    index FILE --chunker NAME [--param k=v …]
                Chunk, embed and index a document in the store; prints the collection as JSON.
                A retriever (``mog``, ``mogg``, ``freechunker``) indexes every level: one
                collection each.
    query FILE --chunker NAME --query TEXT [--k 5]
                The live query, headless: one JSON object per hit and line,
                ``{"rank", "distance", "start", "end", "index", "tokens", "text"}``; a retriever
                prints ``{"rank", "score", "level", "index", "start", "end", "ranges", "tokens",
                "text"}`` and says its chosen level on stderr.
    router train --questions FILE.csv|sample:NAME [--corpora DIR] [--chunker mog|mogg] [--param k=v …]
                 --out FILE
                Train MoG's router on a question set's soft labels and save it (levels, base
                chunking and embedder fingerprint recorded); prints questions used/dropped, the
                label histogram, train/validation loss and seconds as JSON. Use the file with
                ``--param router=FILE``.

``eval`` also reports per configuration the mean retrieved tokens, the index time, the texts
embedded and the query time; for a routed retriever the chosen levels and their agreement with
the oracle.

The store is the embedded one under the data directory, or the Chroma server named by
CHROMA_HOST/CHROMA_PORT. Errors are one line on stderr (exit 1; bad arguments exit 2).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from backend.cli.common import StderrProgress, load_input, parse_pairs, positive_int, value_type, write
from backend.config import quiet_hub_progress_bars

__all__ = ["COMMANDS", "add_commands", "run"]

COMMANDS = ("eval", "questions", "index", "query", "router")


_retrieve = value_type(int, lambda v: v == -1 or v > 0, "a positive integer or -1")
_similarity = value_type(float, lambda v: -1.0 <= v <= 1.0, "a number in -1..1")


def _add_config_flags(p: argparse.ArgumentParser, tokenizers: tuple[str, ...]) -> None:
    p.add_argument("--chunker", required=True, help="registered chunker name (see 'chunkers')")
    p.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="chunker parameter (repeatable)"
    )
    p.add_argument("--tokenizer", default="cl100k", choices=tokenizers)
    p.add_argument(
        "--embedder",
        default="default",
        metavar="default|PATH",
        help="embedding model: default (CHUNKLAB_EMBEDDER or the bundled all-MiniLM-L6-v2), a model folder or a hub id",
    )
    p.add_argument("--no-cache", action="store_true", help="neither read nor write cached embeddings")


def add_commands(sub: Any) -> None:
    """Add ``eval``, ``questions``, ``index`` and ``query`` to the CLI's subparsers."""
    from backend.tokenizers import TOKENIZER_NAMES

    tokenizers_names = TOKENIZER_NAMES
    p_eval = sub.add_parser("eval", help="the Chroma report's retrieval metrics of a configuration on a question set")
    p_eval.add_argument(
        "--questions", required=True, metavar="FILE.csv|sample:NAME",
        help="Chroma-format question CSV, or sample:NAME for a bundled sample's set (narrative, technical)",
    )
    p_eval.add_argument(
        "--corpora", type=Path, metavar="DIR", help="folder of <corpus_id>.md/.txt (default: corpora/ beside the CSV)"
    )
    _add_config_flags(p_eval, TOKENIZER_NAMES)
    p_eval.add_argument(
        "--retrieve", type=_retrieve, default=5, metavar="N", help="chunks per question (default 5); -1: as many as contain excerpts"
    )
    p_eval.add_argument(
        "--chunk-spans", choices=("reference", "exact"), default="reference",
        help="where chunks are scored: reference (located as chunking_evaluation does: a trailing '.' "
        "dropped, first occurrence; the default) or exact (the chunker's spans)",
    )
    p_eval.add_argument("--json", action="store_true", help="print the results as one JSON object")

    p_q = sub.add_parser("questions", help="question sets: generate one from a document, or check one")
    q_sub = p_q.add_subparsers(dest="questions_command", required=True, parser_class=type(p_q))
    p_gen = q_sub.add_parser("generate", help="generate a Chroma-format question set from a document")
    p_gen.add_argument("file", help="document path, or sample:NAME")
    p_gen.add_argument("--out", required=True, type=Path, metavar="DIR", help="writes DIR/questions.csv and DIR/corpora/")
    p_gen.add_argument("--n", type=positive_int, default=10, help="questions wanted (default 10)")
    p_gen.add_argument("--base-url", help="OpenAI-compatible API (default OPENAI_BASE_URL; the key: OPENAI_API_KEY)")
    p_gen.add_argument("--model", help="chat model (default OPENAI_MODEL, or the server's only model)")
    p_gen.add_argument("--local", action="store_true", help="use the local fallback (bundled SmolLM2) even if an API is set")
    p_gen.add_argument("--corpus-id", help="corpus id (default: from the file name)")
    p_gen.add_argument("--duplicate-threshold", type=_similarity, default=0.70, metavar="COS")
    p_gen.add_argument("--excerpt-threshold", type=_similarity, default=0.40, metavar="COS")
    p_gen.add_argument("--max-attempts", type=positive_int, metavar="N", help="requests at most (default 3n+2)")
    p_gen.add_argument("--embedder", default="default", metavar="default|PATH", help="embedder of the filters")
    p_gen.add_argument("--seed", type=int, default=0)
    p_chk = q_sub.add_parser("check", help="validate a Chroma-format question set")
    p_chk.add_argument("--questions", required=True, metavar="FILE.csv|sample:NAME")
    p_chk.add_argument("--corpora", type=Path, metavar="DIR", help="default: corpora/ beside the CSV")

    p_index = sub.add_parser("index", help="chunk, embed and index a document in the Chroma store (JSON)")
    p_index.add_argument("file", help="document path, or sample:NAME")
    _add_config_flags(p_index, TOKENIZER_NAMES)

    p_query = sub.add_parser("query", help="top-k chunks of a configuration for a query; one JSON object per line")
    p_query.add_argument("file", help="document path, or sample:NAME")
    _add_config_flags(p_query, TOKENIZER_NAMES)
    p_query.add_argument("--query", required=True, help="the query text")
    p_query.add_argument("--k", type=positive_int, default=5, help="chunks to return (default 5)")

    p_router = sub.add_parser("router", help="MoG's router: train one on a question set")
    r_sub = p_router.add_subparsers(dest="router_command", required=True, parser_class=type(p_router))
    p_train = r_sub.add_parser("train", help="train a router on a question set's soft labels and save it")
    p_train.add_argument("--questions", required=True, metavar="FILE.csv|sample:NAME")
    p_train.add_argument("--corpora", type=Path, metavar="DIR", help="default: corpora/ beside the CSV")
    p_train.add_argument("--chunker", default="mog", choices=("mog", "mogg"), help="the retriever (default mog)")
    p_train.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="retriever parameter (repeatable)"
    )
    p_train.add_argument("--tokenizer", default="cl100k", choices=tokenizers_names)
    p_train.add_argument("--embedder", default="default", metavar="default|PATH", help="embedding model")
    p_train.add_argument("--epochs", type=positive_int, default=200, help="training epochs (default 200)")
    p_train.add_argument("--retrieve", type=positive_int, default=5,
                         help="the depth the router will be used at (default 5): label_k=0 labels each level's top N")
    p_train.add_argument("--seed", type=int, default=0)
    p_train.add_argument("--no-cache", action="store_true", help="neither read nor write cached embeddings")
    p_train.add_argument("--out", required=True, type=Path, metavar="FILE", help="the router file to write")


def _config(args: argparse.Namespace) -> Any:
    """The ChunkerConfig of ``--chunker``/``--param``/``--tokenizer`` (validated, before any file is read)."""
    from backend.chunkers import make_chunker

    return make_chunker(args.chunker, parse_pairs(args.param), args.tokenizer).config


def _embedder(args: argparse.Namespace) -> Any:
    # Our own progress goes to stderr; transformers' "Loading weights" bar would clutter it.
    quiet_hub_progress_bars()
    from backend.models.embeddings import load_text_embedder

    return load_text_embedder(args.embedder)


def _cache(args: argparse.Namespace) -> Any:
    if getattr(args, "no_cache", False):
        return None
    from backend.models.cache import default_cache

    return default_cache()


def _progress(what: str) -> Any:

    return StderrProgress(what)


def run(args: argparse.Namespace) -> int:
    """Run one of :data:`COMMANDS`; returns the exit code (errors propagate to :func:`backend.cli.main.main`)."""
    if args.command == "eval":
        _eval(args)
    elif args.command == "questions":
        if args.questions_command == "generate":
            _generate(args)
        else:
            _check(args)
    elif args.command == "index":
        _index(args)
    elif args.command == "query":
        _query(args)
    elif args.command == "router":
        _router_train(args)
    else:  # pragma: no cover - the parser only routes COMMANDS here
        raise ValueError(f"not a retrieval command: {args.command}")
    return 0


def _question_set(args: argparse.Namespace) -> Any:
    """``--questions`` and ``--corpora`` → the question set (``sample:NAME``: a bundled one)."""
    from backend.errors import ParameterError
    from backend.retrieval.questions import load_question_set, load_sample_question_set

    if args.questions.startswith("sample:"):
        if args.corpora is not None:
            raise ParameterError("--corpora is not used with --questions sample:NAME (the sample is the corpus)")
        return load_sample_question_set(args.questions.removeprefix("sample:"))
    return load_question_set(Path(args.questions).expanduser(), args.corpora)


def _eval(args: argparse.Namespace) -> None:
    from backend.retrieval.evaluate import evaluate
    from backend.retrieval.store import open_store

    config = _config(args)
    questions = _question_set(args)
    store = open_store()  # an unreachable server fails here, before any model loads
    with _progress("evaluating") as line:
        line.status("loading embedder…")
        embedder = _embedder(args)
        result = evaluate(
            questions,
            [config],
            embedder=embedder,
            retrieve=args.retrieve,
            store=store,
            cache=_cache(args),
            use_cache=not args.no_cache,
            chunk_spans=args.chunk_spans,
            progress=line,
        ).results[0]
    if args.json:
        write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")
        return
    s = result.summary
    omega = "precision-Ω" if result.omega_units == "chunks" else "precision-Ω*"
    lines = [
        f"{config.label} · {len(questions)} questions · retrieve {args.retrieve} · {embedder.info.name}"
        f" · {args.chunk_spans} chunk spans",
        f"  recall           {s.recall_mean:6.1%} ± {s.recall_std:.1%}",
        f"  precision        {s.precision_mean:6.1%} ± {s.precision_std:.1%}",
        f"  {omega:<16} {s.precision_omega_mean:6.1%} ± {s.precision_omega_std:.1%}",
        f"  IoU              {s.iou_mean:6.1%} ± {s.iou_std:.1%}",
        f"  retrieved tokens {result.retrieved_tokens_mean:.0f} per question · query {1000 * result.query_seconds:.1f} ms",
        f"  {'entries' if result.omega_units == 'units' else 'chunks'} {result.chunks} · index {result.index_seconds:.1f}s"
        f" · {result.texts_embedded} texts embedded · {result.seconds:.1f}s",
    ]
    if result.omega_units == "units":
        lines.append("  * precision-Ω on the retriever's finest units")
    if result.routing is not None:
        r = result.routing.to_json()
        hist = ", ".join(f"{n} {c}" for n, c in zip(r["levels"], r["chosen_histogram"]))
        agree = "n/a" if r["oracle_agreement"] is None else f"{r['oracle_agreement']:.0%}"
        lines.append(f"  router {r['router']} · chosen levels: {hist} · agrees with the oracle {agree}")
    write("\n".join(lines) + "\n")


def _generate(args: argparse.Namespace) -> None:
    from backend.retrieval.generation import generate_questions
    from backend.retrieval.questions import save_question_set

    doc = load_input(args.file)
    with _progress("generating") as line:
        line.status("loading models…")
        quiet_hub_progress_bars()
        result = generate_questions(
            doc,
            n=args.n,
            corpus_id=args.corpus_id,
            base_url=args.base_url,
            model=args.model,
            local=True if args.local else None,
            embedder=None if args.embedder == "default" else args.embedder,
            duplicate_threshold=args.duplicate_threshold,
            excerpt_threshold=args.excerpt_threshold,
            max_attempts=args.max_attempts,
            seed=args.seed,
            progress=line,
        )
    written = save_question_set(result.question_set(), args.out / "questions.csv", args.out / "corpora")
    summary = {**result.to_json(), "questions_csv": str(written[0]), "corpora": str(args.out / "corpora")}
    write(json.dumps(summary, ensure_ascii=False, indent=2) + "\n")


def _check(args: argparse.Namespace) -> None:
    qs = _question_set(args)
    counts = {cid: sum(q.corpus_id == cid for q in qs.questions) for cid in qs.corpus_ids}
    write(json.dumps({"questions": len(qs), "corpora": counts}, ensure_ascii=False) + "\n")


def _index(args: argparse.Namespace) -> None:
    from backend.chunkers import run_chunker
    from backend.retrieval.store import open_store

    from backend.chunkers.multi import is_retriever

    config = _config(args)
    doc = load_input(args.file)
    store = open_store()
    with _progress("indexing") as line:
        line.status("loading embedder…")
        embedder = _embedder(args)
        if is_retriever(config.name):
            from backend.retrieval.multi.index import build_index

            index = build_index(doc, config, store, embedder, cache=_cache(args),
                                progress=line)
            out = {
                "levels": [{"level": lv.number, "name": lv.name, "name_in_store": lv.collection, "entries": len(lv)}
                           for lv in index.levels],
                "units": len(index.units),
                "texts_embedded": index.texts_embedded,
                "reused": index.reused,
                "seconds": round(index.seconds, 3),
            }
            if index.graph is not None:
                out["graph_edges"] = len(index.graph.edges)
        else:
            chunking = run_chunker(doc, config)
            info = store.index(doc, chunking, embedder, cache=_cache(args), progress=line)
            out = info.to_json()
    out = {**out, "store": store.location, "config": config.to_json(), "embedder": embedder.info.name}
    write(json.dumps(out, ensure_ascii=False) + "\n")


def _query(args: argparse.Namespace) -> None:
    from backend.chunkers import run_chunker
    from backend.errors import ParameterError
    from backend.retrieval.store import open_store

    if not args.query.strip():
        raise ParameterError("--query is empty")
    from backend.chunkers.multi import is_retriever

    config = _config(args)
    doc = load_input(args.file)
    store = open_store()
    if is_retriever(config.name):
        _query_retriever(args, config, doc, store)
        return
    with _progress("indexing") as line:
        line.status("loading embedder…")
        embedder = _embedder(args)
        chunking = run_chunker(doc, config)
        hits = store.search(doc, [chunking], embedder, args.query, args.k, cache=_cache(args))[config]
    write("".join(
        json.dumps({**h.to_json(), "text": doc.text[h.start : h.end]}, ensure_ascii=False) + "\n" for h in hits
    ))


def _query_retriever(args: argparse.Namespace, config: Any, doc: Any, store: Any) -> None:
    import sys

    from backend.retrieval.multi.retrievers import live_retrieve

    with _progress("indexing") as line:
        line.status("loading embedder…")
        embedder = _embedder(args)
        live = live_retrieve(doc, config, store, embedder, args.query, args.k, cache=_cache(args),
                             progress=line)
    sel = live.selection
    write("".join(
        json.dumps({
            "rank": rank, "score": round(p.score, 6), "level": p.level, "index": p.index, "start": p.start,
            "end": p.end, "ranges": [list(r) for r in p.ranges], "tokens": p.tokens,
            "text": "\n".join(doc.text[s:e] for s, e in p.ranges),
        }, ensure_ascii=False) + "\n"
        for rank, p in enumerate(sel.picks, 1)
    ))
    if sel.level is not None:
        names = live.index.levels
        weights = ", ".join(f"{lv.name} {w:.2f}" for lv, w in zip(names, sel.weights or ()))
        print(f"{config.name}: chosen level {names[sel.level - 1].name} (weights: {weights})", file=sys.stderr)
    if live.note:
        print(f"{config.name}: {live.note}", file=sys.stderr)


def _router_train(args: argparse.Namespace) -> None:
    import time

    from backend.chunkers import make_chunker
    from backend.retrieval.multi import level_router as rt
    from backend.retrieval.multi.retrievers import training_data
    from backend.retrieval.store import open_store

    t0 = time.perf_counter()
    chunker = make_chunker(args.chunker, parse_pairs(args.param), args.tokenizer)  # bad parameters: exit 2 first
    config = chunker.config
    questions = _question_set(args)
    store = open_store()
    with _progress("labelling") as line:
        line.status("loading embedder…")
        embedder = _embedder(args)
        data = training_data(questions, config, store, embedder, retrieve=args.retrieve, cache=_cache(args),
                             progress=line)
        line.status("training…")
        router, report = rt.train_router(
            data.vectors, data.labels, epochs=args.epochs, seed=args.seed, base=chunker.shape(), embedder=embedder.info.name, embedder_fingerprint=embedder.info.fingerprint,
            label=chunker.values["label"], soft=chunker.values["soft"],
        )
    path = rt.save_router(router, args.out)
    out = {
        "router": str(path),
        "questions": data.questions,
        "used": data.questions - data.dropped,
        "dropped": data.dropped,
        "levels": list(data.level_names),
        "label_histogram": data.histogram(),
        "train_loss": round(report.train_loss[-1], 5) if report.train_loss else None,
        "val_loss": round(report.val_loss[-1], 5) if report.val_loss else None,
        "epochs": report.epochs,
        "train_seconds": round(report.seconds, 3),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    write(json.dumps(out, ensure_ascii=False) + "\n")
