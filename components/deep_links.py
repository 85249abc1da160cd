"""Deep links with no 404: a page opened by its URL (``/compare?configs=…``) connects at once.

Streamlit's frontend does not know the app's base path, so it guesses it from the URL: opened at
``/compare`` it first tries ``compare`` as the base path (``/compare/_stcore/health``,
``/compare/_stcore/host-config``: two 404s in the browser's log), then the root (streamlit#7074,
"404 health check when navigating directly to a subpage"). The frontend takes the base path
from ``window.__streamlit.BACKEND_BASE_URL`` when the page defines it, and tries only that.

So ``app.py`` is also an ASGI app (``st.App``, which ``streamlit run app.py`` finds and serves):
a route per page answers ``/<page>`` with Streamlit's own ``index.html`` plus one inline script
naming the server's root (with ``server.baseUrlPath``) as the base path. Everything else —
the root, static files, ``_stcore`` — is Streamlit's as before.
"""

from __future__ import annotations

import json
from pathlib import Path

import streamlit as st
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

__all__ = ["PAGES_DIR", "deep_link_routes", "page_paths", "page_with_base"]

PAGES_DIR = Path(__file__).resolve().parent.parent / "pages"
_INDEX = Path(st.__file__).resolve().parent / "static" / "index.html"


def page_paths() -> list[str]:
    """Every page's URL path (``compare``, ``quality``…): ``st.Page`` names a page by its file's stem."""
    return sorted(p.stem for p in PAGES_DIR.glob("*.py") if not p.name.startswith("_"))


def _base_path() -> str:
    """``server.baseUrlPath`` without slashes ("" at the root)."""
    return str(st.get_option("server.baseUrlPath") or "").strip("/")


def page_with_base(index_html: str, base_path: str) -> str:
    """``index_html`` with a script, before anything else runs, that tells the frontend its base path.

    Args:
        index_html: Streamlit's ``index.html``.
        base_path: The server's base URL path without slashes ("" at the root).
    """
    path = json.dumps("/" + base_path)  # a JSON string is a JavaScript string literal
    script = f"<script>window.__streamlit = {{BACKEND_BASE_URL: window.location.origin + {path}}};</script>"
    return index_html.replace("<head>", "<head>\n    " + script, 1)


def deep_link_routes() -> list[Route]:
    """One route per page, ``/<page>`` (under ``server.baseUrlPath``): the app's page with its base path named."""
    base = _base_path()
    html = page_with_base(_INDEX.read_text(encoding="utf-8"), base)

    async def page(_request: Request) -> HTMLResponse:
        return HTMLResponse(html, headers={"Cache-Control": "no-cache"})

    prefix = f"/{base}" if base else ""
    return [Route(f"{prefix}/{name}", page, methods=["GET", "HEAD"]) for name in page_paths()]
