"""What the Chromium tests share beyond ``test_e2e_browser.py``: one app server per test process, and script runs.

:func:`shared_server` starts ``streamlit run app.py`` once per test process (one pytest-xdist
worker) and hands the same URL to every module that asks for it: each test still opens its own
browser context, so its own Streamlit session, but the server's imports (torch, chromadb) and the
models it loads are paid once, not once a module. A test that must be a server's first request,
or that reads the server's log, keeps a server of its own.

:class:`ScriptRuns` counts the app's finished script runs from the websocket's messages, so a test
waits for the run its click started instead of sleeping and hoping it started.
"""

from __future__ import annotations

import time
from contextlib import ExitStack

import pytest
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from tests.support.app_server import serve_app

__all__ = ["ScriptRuns", "shared_server"]

_SERVERS: dict[str, str] = {}


def shared_server(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory, healthy_within: float = 30) -> str:
    """The URL of this process's shared app server, started on the first call; it stops when the test run ends."""
    if "app" not in _SERVERS:
        stack = ExitStack()
        url = stack.enter_context(serve_app(tmp_path_factory.mktemp("shared_app") / "streamlit.log",
                                            healthy_within=healthy_within))
        config.add_cleanup(stack.close)
        _SERVERS["app"] = url
    return _SERVERS["app"]


class ScriptRuns:
    """The full script runs the app finished for one page (fragment runs and runs cut short by a rerun not counted).

    Attach before ``page.goto``; then ``runs.after(page, lambda: button.click())`` clicks and returns once a
    run that started after the click has finished.
    """

    def __init__(self) -> None:
        self.finished = 0

    @classmethod
    def attach(cls, page) -> ScriptRuns:
        runs = cls()

        def frame(payload) -> None:
            if not isinstance(payload, bytes):
                return
            try:
                msg = ForwardMsg.FromString(payload)
            except Exception:  # noqa: BLE001  (not a ForwardMsg: ignore it)
                return
            if msg.WhichOneof("type") == "script_finished" and msg.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                runs.finished += 1

        page.on("websocket", lambda ws: ws.on("framereceived", frame))
        return runs

    def wait_beyond(self, page, count: int, timeout: float = 60) -> None:
        """Wait until more than ``count`` runs have finished (Playwright's events flow while it waits)."""
        deadline = time.monotonic() + timeout
        while self.finished <= count:
            if time.monotonic() > deadline:
                raise AssertionError(f"no script run finished within {timeout:g} s ({self.finished} so far)")
            page.wait_for_timeout(50)

    def after(self, page, action, timeout: float = 60) -> None:
        """Do ``action``, then wait until a script run finishes after it."""
        count = self.finished
        action()
        self.wait_beyond(page, count, timeout)
