"""Small JSON files of remembered facts (weight hashes, the measured ``auto`` precision).

Read leniently (a missing or damaged file is an empty dict) and written atomically (a
temporary file in the same folder, then a rename), so a killed process or a concurrent writer
never leaves half a file. A data dir that cannot be written only costs measuring again.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

__all__ = ["read_json_dict", "write_json_atomic"]


def read_json_dict(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; {} when the file is missing, unreadable or not an object."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json_atomic(path: Path, data: dict[str, Any]) -> bool:
    """Write ``data`` to ``path`` through a temporary file and a rename; False when it cannot be written."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        return False
    return True
