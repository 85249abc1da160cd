"""The retrieval lab's subcommands of ``python -m backend`` (wired in by :mod:`backend.cli.main`).

Subcommands:
    eval --questions FILE.csv|sample:NAME [--corpora DIR] --chunker NAME [--param k=v …] [--tokenizer T]
         [--embedder default|PATH] [--retrieve 5] [--chunk-spans reference|exact] [--json]
         [--per-question FILE.csv|FILE.json]
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
                ``--per-question FILE`` also writes every question's scores (the Benchmark
                page's per-question export, :func:`backend.lab.benchmark.per_question`): CSV
                for ``.csv``, JSON for ``.json``.
    questions generate FILE --out DIR [--n 10] [--method chat|bundled|model-free] [--base-url URL]
                [--model NAME] [--local]
                Generate a question set from a document and write ``DIR/questions.csv`` and
                ``DIR/corpora/<corpus_id>.md``; prints a JSON summary, and on stderr one line:
                kept of attempted, the method and the seconds taken. ``--method chat``: an
                OpenAI-compatible LLM (OPENAI_BASE_URL/OPENAI_API_KEY or --base-url);
                ``bundled`` (``--local``): the weaker local fallback on SmolLM2;
                ``model-free``: questions from a passage's words and its neighbourhood's in
                about a second, no model (:mod:`backend.retrieval.modelfree`). Default: chat
                when an API is set, else bundled. The API key is read from OPENAI_API_KEY only.
                Beside the CSV, ``questions.method`` states how the questions were made.
    questions compare SET_A SET_B [--config SPEC …] [--corpora-a DIR] [--corpora-b DIR] [--retrieve 5]
                [--n N] [--draws 2000] [--seed 0] [--json]
                Whether SET_B ranks configurations as SET_A does: both run the same benchmark
                over the same configurations (at least 3; ten by default), and for each metric
                prints Spearman's ρ of the configurations' orders with a 95% bootstrap interval
                over questions (:mod:`backend.lab.agreement`). SET_B may be
                ``generate:METHOD``, generated on SET_A's corpora. Sets on different corpora
                are a one-line error.
    questions check --questions FILE.csv|sample:NAME [--corpora DIR]
                Validate a question set; prints ``{"questions", "corpora", "method"}`` (how its
                questions were made, as the set states it: null when it does not).
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

``--embedder`` names the command's one embedder: retrieval embeds with it, and so does a chunker
that embeds (``semantic``, ``semantic_max``…), whose chunks therefore follow the same model. A
remote embedder whose served name has stood for another model in this data directory says so
on stderr (see :mod:`backend.models.probes`). A command that fails leaves no empty Chroma store
behind (:func:`backend.retrieval.store.store_for_command`).

``eval`` also reports per configuration the mean retrieved tokens, the index time, the texts
embedded and the query time; for a routed retriever the chosen levels and their agreement with
the oracle. Every configuration goes through its retriever
(:func:`backend.retrieval.retriever.registry.make_retriever`): ``index``, ``query`` and ``eval``
have one path for chunkings and retrievers alike.

The store is the embedded one under the data directory, or the Chroma server named by
CHROMA_HOST/CHROMA_PORT. Errors are one line on stderr (exit 1; bad arguments exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from backend.chunkers import make_chunker
from backend.chunkers.context import ModelContext
from backend.cli.common import StderrProgress, load_input, parse_pairs, positive_int, value_type, write
from backend.config import quiet_hub_progress_bars
from backend.errors import ParameterError
from backend.lab.agreement import DEFAULT_CONFIGS, DEFAULT_PER_CORPUS, GENERATE_METHODS, compare_question_sets
from backend.lab.benchmark import per_question, write_per_question
from backend.retrieval.agreement import DRAWS
from backend.models.cache import default_cache
from backend.models.embeddings import load_text_embedder
from backend.models.remote_embedder import RemoteEmbedder
from backend.retrieval.evaluate import evaluate
from backend.retrieval.generation import (
    DEFAULT_DUPLICATE_THRESHOLD,
    DEFAULT_EXCERPT_THRESHOLD,
    METHODS,
    generate_questions,
)
from backend.retrieval.modelfree import model_free_questions
from backend.retrieval.multi.level_router import save_router, train_router
from backend.retrieval.questions import load_question_set, load_sample_question_set, save_question_set
from backend.retrieval.retriever.levels import LevelRetriever
from backend.retrieval.retriever.registry import make_retriever
from backend.retrieval.store import store_for_command
from backend.tokenizers import TOKENIZER_NAMES

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
        help="the command's one embedding model, for retrieval and for embedding chunkers (semantic…) alike: "
        "default (CHUNKLAB_EMBEDDER or the bundled all-MiniLM-L6-v2), a model folder, a hub id, "
        "or remote / an http(s)://…/v1 URL (an embeddings server, CHUNKLAB_EMBEDDER_*)",
    )
    p.add_argument("--no-cache", action="store_true", help="neither read nor write cached embeddings")


def add_commands(sub: Any) -> None:
    """Add ``eval``, ``questions``, ``index``, ``query`` and ``router`` to the CLI's subparsers."""
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
    p_eval.add_argument(
        "--per-question", type=Path, metavar="FILE.csv|FILE.json",
        help="also write every question's scores, entries, tokens and levels (the Benchmark page's export)",
    )

    p_q = sub.add_parser("questions", help="question sets: generate one from a document, or check one")
    q_sub = p_q.add_subparsers(dest="questions_command", required=True, parser_class=type(p_q))
    p_gen = q_sub.add_parser("generate", help="generate a Chroma-format question set from a document")
    p_gen.add_argument("file", help="document path, or sample:NAME")
    p_gen.add_argument("--out", required=True, type=Path, metavar="DIR", help="writes DIR/questions.csv and DIR/corpora/")
    p_gen.add_argument("--n", type=positive_int, default=10, help="questions wanted (default 10)")
    p_gen.add_argument("--base-url", help="OpenAI-compatible API (default OPENAI_BASE_URL; the key: OPENAI_API_KEY)")
    p_gen.add_argument("--model", help="chat model (default OPENAI_MODEL, or the server's only model)")
    p_gen.add_argument(
        "--method", choices=METHODS,
        help="chat (an OpenAI-compatible API), bundled (SmolLM2, weaker) or model-free (keyword questions, "
        "seconds, offline); default: chat when an API is set, else bundled",
    )
    p_gen.add_argument("--local", action="store_true", help="the same as --method bundled")
    p_gen.add_argument("--corpus-id", help="corpus id (default: from the file name)")
    p_gen.add_argument("--duplicate-threshold", type=_similarity, default=DEFAULT_DUPLICATE_THRESHOLD, metavar="COS")
    p_gen.add_argument("--excerpt-threshold", type=_similarity, default=DEFAULT_EXCERPT_THRESHOLD, metavar="COS")
    p_gen.add_argument("--max-attempts", type=positive_int, metavar="N", help="requests at most (default 3n+2)")
    p_gen.add_argument("--embedder", default="default", metavar="default|PATH", help="embedder of the filters")
    p_gen.add_argument("--seed", type=int, default=0)
    p_cmp = q_sub.add_parser(
        "compare",
        help="whether two question sets on the same corpora rank configurations alike (Spearman ρ per metric, "
        "with a bootstrap interval over questions)",
    )
    p_cmp.add_argument("set_a", metavar="SET_A", help="the trusted set: FILE.csv or sample:NAME")
    p_cmp.add_argument(
        "set_b", metavar="SET_B",
        help=f"the set to check: FILE.csv, sample:NAME, or generate:METHOD ({', '.join(GENERATE_METHODS)}), "
        "generated on SET_A's corpora",
    )
    p_cmp.add_argument(
        "--config", action="append", default=[], metavar="SPEC",
        help="'NAME key=value … [tokenizer=T]' (repeatable, at least 3); default: ten configurations "
        "(recursive 100/200/400/800, fixed_token 100 and 250/125, sentence 200, paragraph, cluster 200, "
        "semantic_max 300)",
    )
    for side in "ab":
        p_cmp.add_argument(f"--corpora-{side}", type=Path, metavar="DIR",
                           help=f"SET_{side.upper()}'s corpora (default: corpora/ beside the CSV)")
    p_cmp.add_argument("--retrieve", type=positive_int, default=5, help="chunks retrieved per question (default 5)")
    p_cmp.add_argument(
        "--n", type=positive_int, metavar="N",
        help="questions generated per corpus for generate:METHOD (default: "
        + ", ".join(f"{n} for {m}" for m, n in DEFAULT_PER_CORPUS.items()) + ")",
    )
    p_cmp.add_argument("--draws", type=positive_int, default=DRAWS,
                       help=f"bootstrap draws of each interval (default {DRAWS})")
    p_cmp.add_argument("--seed", type=int, default=0, help="seeds the generation and the draws (default 0)")
    p_cmp.add_argument("--embedder", default="default", metavar="default|PATH",
                       help="the one embedder of both benchmarks (and of a generation's filters)")
    p_cmp.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
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
    return make_chunker(args.chunker, parse_pairs(args.param), args.tokenizer).config


def _embedder(args: argparse.Namespace) -> Any:
    """``--embedder``, loaded (or connected); a remote one's note on stderr (another model seen under its name)."""
    # Our own progress goes to stderr; transformers' "Loading weights" bar would clutter it.
    quiet_hub_progress_bars()
    embedder = load_text_embedder(args.embedder)
    if isinstance(embedder, RemoteEmbedder) and embedder.note is not None:
        print(embedder.note, file=sys.stderr)
    return embedder


def _chunking_context(embedder: Any) -> ModelContext:
    """The model context of the command's chunkers: ``--embedder`` is also the semantic and cluster chunkers' embedder."""
    return ModelContext(embedder=embedder)


def _cache(args: argparse.Namespace) -> Any:
    return None if getattr(args, "no_cache", False) else default_cache()


def _progress(what: str) -> Any:
    return StderrProgress(what)


def run(args: argparse.Namespace) -> int:
    """Run one of :data:`COMMANDS`; returns the exit code (errors propagate to :func:`backend.cli.main.main`)."""
    if args.command == "eval":
        _eval(args)
    elif args.command == "questions":
        if args.questions_command == "generate":
            _generate(args)
        elif args.questions_command == "compare":
            _compare(args)
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
    if args.questions.startswith("sample:"):
        if args.corpora is not None:
            raise ParameterError("--corpora is not used with --questions sample:NAME (the sample is the corpus)")
        return load_sample_question_set(args.questions.removeprefix("sample:"))
    return load_question_set(Path(args.questions).expanduser(), args.corpora)


def _eval(args: argparse.Namespace) -> None:
    config = _config(args)
    if args.per_question is not None and args.per_question.suffix.lower() not in (".csv", ".json"):
        raise ParameterError(f"--per-question {args.per_question.name}: the file must end in .csv or .json")
    questions = _question_set(args)
    # An unreachable server fails here, before any model loads; a new store is gone again if the run fails.
    with store_for_command() as store, _progress("evaluating") as line:
        line.status("loading embedder…")
        embedder = _embedder(args)
        benchmark = evaluate(
            questions,
            [config],
            embedder=embedder,
            retrieve=args.retrieve,
            store=store,
            cache=_cache(args),
            use_cache=not args.no_cache,
            context=_chunking_context(embedder),
            chunk_spans=args.chunk_spans,
            progress=line,
        )
    result = benchmark.results[0]
    if args.per_question is not None:
        path = write_per_question(per_question(benchmark, ["A"]), args.per_question)
        print(f"per-question results: {path}", file=sys.stderr)
    if args.json:
        write(json.dumps(result.to_json(), ensure_ascii=False) + "\n")
        return
    s = result.summary
    terms = result.terms
    omega = "precision-Ω" + terms.mark
    lines = [
        f"{config.label} · {len(questions)} questions · retrieve {args.retrieve} · {embedder.info.name}"
        f" · {args.chunk_spans} chunk spans",
        f"  recall           {s.recall_mean:6.1%} ± {s.recall_std:.1%}",
        f"  precision        {s.precision_mean:6.1%} ± {s.precision_std:.1%}",
        f"  {omega:<16} {s.precision_omega_mean:6.1%} ± {s.precision_omega_std:.1%}",
        f"  IoU              {s.iou_mean:6.1%} ± {s.iou_std:.1%}",
        f"  retrieved tokens {result.retrieved_tokens_mean:.0f} per question · query {1000 * result.query_seconds:.1f} ms",
        f"  {terms.counted} {result.chunks} · index {result.index_seconds:.1f}s"
        f" · {result.texts_embedded} texts embedded · {result.seconds:.1f}s",
        *(f"  {note}" for note in terms.footnotes),
    ]
    if result.routing is not None:
        r = result.routing.to_json()
        hist = ", ".join(f"{n} {c}" for n, c in zip(r["levels"], r["chosen_histogram"]))
        agree = "n/a" if r["oracle_agreement"] is None else f"{r['oracle_agreement']:.0%}"
        lines.append(f"  router {r['router']} · chosen levels: {hist} · agrees with the oracle {agree}")
    write("\n".join(lines) + "\n")


def _generate(args: argparse.Namespace) -> None:
    if args.local and args.method not in (None, "bundled"):
        raise ParameterError(f"--local is --method bundled: it cannot go with --method {args.method}")
    method = "bundled" if args.local else args.method
    doc = load_input(args.file)
    with _progress("generating") as line:
        if method == "model-free":
            result = model_free_questions(
                doc, n=args.n, corpus_id=args.corpus_id, max_attempts=args.max_attempts, seed=args.seed, progress=line
            )
        else:
            line.status("loading models…")
            quiet_hub_progress_bars()
            result = generate_questions(
                doc,
                n=args.n,
                corpus_id=args.corpus_id,
                base_url=args.base_url,
                model=args.model,
                method=method,
                embedder=None if args.embedder == "default" else args.embedder,
                duplicate_threshold=args.duplicate_threshold,
                excerpt_threshold=args.excerpt_threshold,
                max_attempts=args.max_attempts,
                seed=args.seed,
                progress=line,
            )
    print(result.how, file=sys.stderr)
    written = save_question_set(result.question_set(), args.out / "questions.csv", args.out / "corpora")
    summary = {**result.to_json(), "questions_csv": str(written[0]), "corpora": str(args.out / "corpora")}
    write(json.dumps(summary, ensure_ascii=False, indent=2) + "\n")


def _compare(args: argparse.Namespace) -> None:
    quiet_hub_progress_bars()
    with _progress("comparing") as line:
        result = compare_question_sets(
            args.set_a, args.set_b, args.config or DEFAULT_CONFIGS, corpora_a=args.corpora_a,
            corpora_b=args.corpora_b, embedder=None if args.embedder == "default" else args.embedder,
            retrieve=args.retrieve, per_corpus=args.n, draws=args.draws, seed=args.seed, progress=line,
        )
    if args.json:
        write(json.dumps(result.to_json(), ensure_ascii=False, indent=2) + "\n")
    else:
        write("\n".join(result.lines()) + "\n")


def _check(args: argparse.Namespace) -> None:
    qs = _question_set(args)
    counts = {cid: sum(q.corpus_id == cid for q in qs.questions) for cid in qs.corpus_ids}
    write(json.dumps({"questions": len(qs), "corpora": counts, "method": qs.method or None}, ensure_ascii=False) + "\n")


def _index(args: argparse.Namespace) -> None:
    config = _config(args)
    doc = load_input(args.file)
    with store_for_command() as store, _progress("indexing") as line:
        line.status("loading embedder…")
        embedder = _embedder(args)
        retriever = make_retriever(config, context=_chunking_context(embedder))
        index = retriever.index(doc, store, embedder, cache=_cache(args), progress=line)
    out = {**index.to_json(), "store": store.location, "config": config.to_json(), "embedder": embedder.info.name}
    write(json.dumps(out, ensure_ascii=False) + "\n")


def _query(args: argparse.Namespace) -> None:
    if not args.query.strip():
        raise ParameterError("--query is empty")
    config = _config(args)
    doc = load_input(args.file)
    with store_for_command() as store, _progress("indexing") as line:
        line.status("loading embedder…")
        embedder = _embedder(args)
        answer = make_retriever(config, context=_chunking_context(embedder)).answer(
            doc, store, embedder, args.query, args.k, cache=_cache(args), progress=line
        )
    write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in answer.json_lines(doc.text)))
    for note in answer.notes():
        print(note, file=sys.stderr)


def _router_train(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    chunker = make_chunker(args.chunker, parse_pairs(args.param), args.tokenizer)  # bad parameters: exit 2 first
    retriever = LevelRetriever(chunker.config)
    questions = _question_set(args)
    with store_for_command() as store, _progress("labelling") as line:
        line.status("loading embedder…")
        embedder = _embedder(args)
        data = retriever.training_data(questions, store, embedder, retrieve=args.retrieve, cache=_cache(args),
                                       progress=line)
        line.status("training…")
        router, report = train_router(
            data.vectors, data.labels, epochs=args.epochs, seed=args.seed, base=chunker.level_spec(),
            embedder=embedder.info.name, embedder_fingerprint=embedder.info.fingerprint,
            label=chunker.values["label"], soft=chunker.values["soft"],
        )
    path = save_router(router, args.out)
    out = {
        "router": str(path),
        "questions": data.questions,
        "used": data.usable,
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
