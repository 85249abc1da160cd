"""``python -m backend ARGS`` run in the test's own process: exit code, stdout and stderr, and no leftovers.

For tests about what the CLI prints and returns rather than about the process: they skip a Python start-up
and share the models already loaded. ``main`` attaches handlers to the ``backend`` loggers once per process
(the "resumed: …" notes, on the ``sys.stderr`` of that moment: here, the test's capture); they are taken
off again after each call, so that no later test logs into a capture that is closed, and each call prints
its notes on its own stderr, as a process would.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence

import pytest

__all__ = ["run_main"]


def _backend_loggers() -> dict[str, logging.Logger]:
    names = [n for n in list(logging.Logger.manager.loggerDict) if n == "backend" or n.startswith("backend.")]
    return {n: logging.getLogger(n) for n in names}


def run_main(args: Sequence[str], capsys: pytest.CaptureFixture[str]) -> subprocess.CompletedProcess:
    """Run ``backend.cli.main.main(args)``; return its code (argparse's ``SystemExit`` too), stdout, stderr."""
    from backend.cli.main import main

    saved = {n: (logger.handlers[:], logger.level) for n, logger in _backend_loggers().items()}
    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as exit_:  # argparse's errors
        code = exit_.code
    finally:
        for name, logger in _backend_loggers().items():
            handlers, level = saved.get(name, ([], logging.NOTSET))
            logger.handlers[:] = handlers
            logger.setLevel(level)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out.encode("utf-8"), err.encode("utf-8"))
