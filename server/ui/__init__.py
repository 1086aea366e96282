"""The web UI: the canvas editor and the run view served at `/` (docs/ui.md).

Only files: the page (`static/index.html`) and its bundle (`static/assets/`), built by Vite from the React
sources in `web/` (`npm --prefix server/ui/web ci && npm --prefix server/ui/web run build`) and shipped as
package data; served with a strict Content-Security-Policy (scripts and styles from this origin only,
nothing inline, no frames, no plugins). Everything the page shows it reads from the API under `/api/v1` with the tenant's token, which
lives in the browser's sessionStorage and travels in the Authorization header, never in a URL.
"""
from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles

STATIC = Path(__file__).resolve().parent / "static"
PREFIX = "/ui"

CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data: blob:",
    "connect-src 'self'",
    "font-src 'self'",
    "form-action 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
    "object-src 'none'",
])
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


class UIFiles(StaticFiles):
    """The UI's assets with the page's security headers."""

    def file_response(self, *args, **kwargs) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(HEADERS)
        return response


router = APIRouter(include_in_schema=False)


@router.get("/")
async def index() -> Response:
    return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8", headers=HEADERS)


def install(app: FastAPI) -> None:
    """Serve the page at `/` and its assets under `/ui/`."""
    app.include_router(router)
    app.mount(PREFIX, UIFiles(directory=STATIC), name="ui")
