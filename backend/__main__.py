"""``python -m backend`` runs the CLI."""

import os
import signal
import sys

from backend.cli.main import main

code = main()
if code == 130:
    # Interrupted: leave now with 130. A normal exit would join torch's and tokenizers'
    # worker threads, and a Ctrl-C landing during that shutdown turns the exit status into
    # "killed by SIGINT" (seen as -2) instead of 130.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)
sys.exit(code)
