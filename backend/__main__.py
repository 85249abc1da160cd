"""``python -m backend`` runs the CLI."""

import os
import signal
import sys


def _leave_interrupted() -> None:
    # Interrupted: leave now with 130. A normal exit would join torch's and tokenizers'
    # worker threads, and a Ctrl-C landing during that shutdown turns the exit status into
    # "killed by SIGINT" (seen as -2) instead of 130.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


try:  # a Ctrl-C while the CLI's libraries load (torch, pyarrow…: seconds) is an interrupt too, not a traceback
    from backend.cli.main import main
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    _leave_interrupted()

code = main()
if code == 130:
    _leave_interrupted()
sys.exit(code)
