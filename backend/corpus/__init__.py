"""Corpus runs: a set of configurations over a folder (or a zip) of documents, resumable, on one machine or on Ray.

Layers, in the order data flows:

- :mod:`backend.corpus.inputs`: the documents of a folder or a zip, and the files skipped with their reason.
- :mod:`backend.corpus.spec`: :class:`~backend.corpus.spec.CorpusSpec`, what a run computes (configurations,
  metrics, settings, question set); its :meth:`~backend.corpus.spec.CorpusSpec.digest` is what a resumed
  run must match.
- :mod:`backend.corpus.work`: :func:`~backend.corpus.work.document_rows`, one document's rows (one per
  configuration): the same pure function whichever engine calls it, so ``--engine local`` and
  ``--engine ray`` give identical numbers.
- :mod:`backend.corpus.results`: the output folder (``run.json``, ``results.jsonl``, ``skipped.jsonl``),
  appended one document at a time, read back for resuming.
- :mod:`backend.corpus.engine`: :func:`~backend.corpus.engine.run_corpus` and the local engine;
  :mod:`backend.corpus.ray_engine` the Ray one.
- :mod:`backend.corpus.aggregate`: the table per configuration (mean, spread, 95% interval), the
  distributions and the documents where the configurations disagree most.
"""
