"""Write ``tests/durations.json``: each test file's seconds in a measured run, slowest first.

``tests/conftest.py`` runs the slowest files first, so that pytest-xdist's workers finish together.
Refresh it after a change that moves a file's cost a lot::

    bash scripts/test.sh --junitxml=/tmp/suite.xml
    .venv/bin/python scripts/test_durations.py /tmp/suite.xml
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "durations.json"


def file_seconds(report: Path) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown of its tests) in a JUnit XML report of pytest's."""
    seconds: Counter[str] = Counter()
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "")
        parts = module.split(".")
        # classname is the module's dotted path, then the class for a test in a class
        while parts and not (ROOT / Path(*parts)).with_suffix(".py").is_file():
            parts.pop()
        if parts:
            seconds[Path(*parts).with_suffix(".py").as_posix()] += float(case.get("time", 0.0))
    return {name: round(s, 1) for name, s in seconds.most_common()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="a JUnit XML report of a whole run (pytest --junitxml)")
    args = parser.parse_args(argv)
    if not args.report.is_file():
        print(f"error: no report at {args.report}", file=sys.stderr)
        return 1
    seconds = file_seconds(args.report)
    OUT.write_text(json.dumps(seconds, indent=1) + "\n", encoding="utf-8")
    print(f"{len(seconds)} files, {sum(seconds.values()):.0f} s in all -> {OUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
