"""The CLI called in-process: one import of torch and one load of each model for a whole test file.

``run_main`` runs ``backend.cli.main.main`` with the environment ``run_cli`` gives a subprocess (a data
folder that shares the run's converted models, the CPU, no remote Chroma or OpenAI settings) and returns a
``subprocess.CompletedProcess`` with the bytes written on stdout and stderr, so a test reads it as it
would a child's. For tests that are not about the process itself (signals, startup, environment).
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

from tests.support.datadir import shared_models_data_dir

__all__ = ["run_main"]

_DROPPED = ("CHROMA_HOST", "CHROMA_PORT", "OPENAI_BASE_URL", "OPENAI_API_KEY", "CHUNKLAB_CACHE_DIR")


def _backend_loggers() -> dict[str, logging.Logger]:
    names = [n for n in list(logging.Logger.manager.loggerDict) if n == "backend" or n.startswith("backend.")]
    return {n: logging.getLogger(n) for n in names}


def run_main(*args: str, data_dir: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    """``python -m backend *args`` in this process; exit code and output as a finished child's.

    ``data_dir``: run in ``run_cli``'s environment, with this data folder (it gets the run's converted
    models) and no remote Chroma, OpenAI or cache settings but those in ``env``. None: the test
    process's environment as the test set it (``tests/conftest.py`` gives each worker a data folder),
    plus ``env``.
    """
    from backend.cli.main import main

    wanted = {"CHUNKLAB_DEVICE": "cpu", **env}
    if data_dir is not None:
        wanted["CHUNKLAB_DATA_DIR"] = str(shared_models_data_dir(data_dir))
    saved_env = dict(os.environ)
    saved_streams = sys.stdout, sys.stderr
    # main attaches the "resumed: …" handlers to the backend loggers, on the stderr of that call:
    # they are taken off again, so each call prints its notes on its own stderr and none logs into a closed one.
    saved_handlers = {n: (list(lg.handlers), lg.level) for n, lg in _backend_loggers().items()}
    out, err = io.BytesIO(), io.BytesIO()
    # Kept in locals: a collected wrapper would close its BytesIO before it is read.
    out_text = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    err_text = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    sys.stdout, sys.stderr = out_text, err_text
    try:
        # A test that called main itself left its note handlers on, on a stderr of its own; main adds none
        # while one is on (once per process): they are off for this call, and back after it.
        for lg in _backend_loggers().values():
            lg.handlers[:] = [h for h in lg.handlers if not getattr(h, "_chunklab_notes", False)]
        for name in _DROPPED if data_dir is not None else ():
            if name not in env:
                os.environ.pop(name, None)
        os.environ.update(wanted)
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse: --help, bad arguments
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        sys.stdout, sys.stderr = saved_streams
        os.environ.clear()
        os.environ.update(saved_env)
        for name, lg in _backend_loggers().items():
            handlers, level = saved_handlers.get(name, ([], logging.NOTSET))
            lg.handlers[:] = handlers
            lg.setLevel(level)
    result = subprocess.CompletedProcess(["python", "-m", "backend", *args], code, out.getvalue(), err.getvalue())
    out_text.detach(), err_text.detach()
    return result
