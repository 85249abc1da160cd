"""The lab's tasks: one module per thing a page or a ``python -m backend`` subcommand does.

A page reads its widgets, makes one call here and renders what comes back; the CLI calls the
same function and prints it. So what a page shows, the CLI can print, and no rule, cache key
or job plan is written twice.

- ``models``: the models a session computes with (:class:`~backend.lab.models.SessionModels`)
  and what the output cache answers without running them;
- ``jobs``: :class:`~backend.lab.jobs.JobPlan`, a background job not started yet (its signature,
  title, models and body), what every task that needs a model run returns;
- ``settings``: every page setting (section, name, type, default, range or choices), written once;
- ``runs``: model-backed configurations' chunkings and the job that runs the missing ones;
- ``match``: match lengths (tune configurations to one mean chunk length);
- ``compare``: each configuration's chunking or why there is none, the statistics table, the
  text window, a click on the boundary strip, the chunk inspector;
- ``curves``: what each chunker cut on, read without a model call;
- ``document``: the text preview's parts and one scoring pass's per-sentence summary (Document, Models);
- ``quality``: quality scoring (what is known, missing, its cost, its job) and the Quality table;
- ``summary``: the Summary page's rows, verdict and notes, and the plan of its missing scores;
- ``ppl``: the Meta-Chunking view (the PPL chunker the settings choose, its cut, θ's range and
  curve, the per-sentence CSV) and its scoring and margin-sampling jobs;
- ``session``: a saved session's settings, written and read back through ``settings``;
- ``retrieval``: the live search and CP plans and what the answers show (tables, scores, the document view);
- ``benchmark``: the benchmark's plan, its results tables, the per-question export and the routing section;
- ``reproduce``: a paper's table rerun on a question set beside the paper's numbers (``reproduce chroma``);
- ``snippet``: "Use in your pipeline": a configuration as the pip line, the spec and ready code;
- ``agreement``: whether two question sets order the same configurations alike (``questions compare``).

Import what you need from its module.
"""

__all__ = [
    "agreement", "benchmark", "compare", "curves", "document", "jobs", "match", "models", "ppl", "quality",
    "retrieval", "runs", "reproduce", "session", "settings", "snippet", "summary",
]
