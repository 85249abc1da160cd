"""The app's own start never watches files (issue 17, item 1).

Streamlit's default file watcher follows the whole checkout recursively, ``.venv`` included, and
every file another process opens there feeds its inotify queue until it overflows and rescans:
one core busy while the app is idle. ``.streamlit/config.toml`` turns the watcher off, and
``scripts/app.sh`` starts the app from the checkout's root (where Streamlit reads that file)
without overriding it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib

from tests.conftest import ROOT


def _config() -> dict:
    return tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))


def test_config_turns_the_file_watcher_off():
    server = _config()["server"]
    assert server["fileWatcherType"] == "none"
    assert server["runOnSave"] is False


def test_streamlit_reads_the_setting_from_the_checkout_root():
    """The installed Streamlit knows the option and takes the value from the project's file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    code = (
        "from streamlit import config\n"
        "config.get_config_options(force_reparse=True)\n"
        "print(config.get_option('server.fileWatcherType'), config.get_option('server.runOnSave'))\n"
        "print(config.get_where_defined('server.fileWatcherType'))\n"
        "print(config.get_option('global.minCachedMessageSize'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True
    ).stdout.splitlines()
    assert out[0] == "none False"
    assert out[1] == str(ROOT / ".streamlit" / "config.toml")
    # No ForwardMsg cache: a reference to an element the browser dropped leaves the rest of a run undrawn.
    assert float(out[2]) >= 1e15


def test_app_sh_starts_from_the_root_and_does_not_override_the_watcher():
    script = (ROOT / "scripts" / "app.sh").read_text(encoding="utf-8")
    lines = [line.strip() for line in script.splitlines() if line.strip() and not line.strip().startswith("#")]
    start = [i for i, line in enumerate(lines) if "streamlit run app.py" in line]
    root = [i for i, line in enumerate(lines) if line == 'cd "$(dirname "$0")/.."']
    assert start and root and root[0] < start[0], "app.sh must cd to the checkout root before `streamlit run`"
    code = "\n".join(lines)
    options = ("fileWatcherType", "runOnSave", "STREAMLIT_SERVER_FILE_WATCHER_TYPE", "STREAMLIT_SERVER_RUN_ON_SAVE")
    for option in options:
        assert not re.search(option, code, re.IGNORECASE), f"app.sh sets {option}; leave it to .streamlit/config.toml"


def test_no_page_needs_magic_and_magic_is_off():
    """Magic parses each page with ast.parse, which Python 3.11 cannot run beside another thread's (gh-106905)."""
    import ast

    assert _config()["runner"]["magicEnabled"] is False
    for path in [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Expr) and not isinstance(node.value, (ast.Call, ast.Await)):
                is_doc = isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                assert is_doc, f"{path.name}:{node.lineno} is a bare expression: magic would have drawn it"
