"""``python -m backend`` runs the CLI."""

import sys

from backend.cli import main

sys.exit(main())
