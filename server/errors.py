"""RAGFlow's result envelope and return codes, and the exception handlers that produce them.

Success is `{"code": 0, "data": ...}`; failure `{"code": <RetCode>, "message": ...}` (plus `data` where
it helps, e.g. a DSL's diagnostics). RAGFlow answers both with HTTP 200, and its clients read the
code, so the RAGFlow routes do the same for what a request asks (an unknown agent, a DSL that does
not compile, a busy session). A malformed request (ARGUMENT_ERROR: a body that is no JSON object, a
missing or mistyped field, a number out of range, text that is not Unicode) is a 4xx on every route,
in the same shape: the request itself is wrong, and HTTP says so to any client. The compile-and-run
routes (`/api/v1/graphs/...`), the OpenAI-compatible mode and the file routes (uploads, attachments,
artifact downloads) set a matching HTTP status for every error, because their clients (the `openai` package, plain HTTP tools,
browsers) look at the status first. No input gets a 500: that is left for the server's own bugs.
"""
from __future__ import annotations

import logging
from enum import IntEnum
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("canvas2graph.server")


class RetCode(IntEnum):
    """RAGFlow's return codes (common/constants.py)."""
    SUCCESS = 0
    EXCEPTION_ERROR = 100
    ARGUMENT_ERROR = 101
    DATA_ERROR = 102
    OPERATING_ERROR = 103
    RUNNING = 106
    PERMISSION_ERROR = 108
    AUTHENTICATION_ERROR = 109
    UNAUTHORIZED = 401
    NOT_FOUND = 404
    SERVER_ERROR = 500


class ApiError(Exception):
    """An error reply: RAGFlow's code and message, and the HTTP status for clients that want one."""

    def __init__(self, code: int, message: str, *, status: int = 400, data: Any = None):
        super().__init__(message)
        self.code, self.message, self.status, self.data = int(code), message, status, data

    def body(self) -> dict:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            body["data"] = self.data
        return body


def argument_error(message: str) -> ApiError:
    return ApiError(RetCode.ARGUMENT_ERROR, message, status=400)


def data_error(message: str, data: Any = None) -> ApiError:
    return ApiError(RetCode.DATA_ERROR, message, status=400, data=data)


def not_found(what: str) -> ApiError:
    # RAGFlow answers another tenant's ids with DATA_ERROR; so do we, worded as "not found" so that
    # nobody can tell another tenant's id from one that does not exist
    return ApiError(RetCode.DATA_ERROR, f"{what} not found", status=404)


def ok(data: Any = True, **extra: Any) -> dict:
    return {"code": 0, "data": data, **extra}


def wants_http_status(request: Request) -> bool:
    path = request.url.path
    return (path.startswith(("/api/v1/graphs", "/api/v1/agents_openai", "/api/v1/documents/artifact"))
            or getattr(request.state, "openai", False) or getattr(request.state, "http_status", False))


def error_response(request: Request, error: ApiError) -> JSONResponse:
    malformed = error.code == RetCode.ARGUMENT_ERROR and 400 <= error.status < 500
    return JSONResponse(error.body(), status_code=error.status if malformed or wants_http_status(request) else 200)


def _validation_message(exc: RequestValidationError) -> str:
    problems = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            where = err.get("ctx", {}).get("error", "") or err.get("msg", "")
            return f"the request body is not valid JSON: {where}"
        location = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        if not location and err.get("type") in ("model_attributes_type", "dict_type"):
            return "the request body must be a JSON object"
        if err.get("type") == "missing":
            problems.append(f"`{location}` is required")
        else:
            problems.append(f"`{location}`: {err.get('msg', 'invalid value')}" if location else err.get("msg", ""))
    return "; ".join(problems) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError):
        return error_response(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return error_response(request, argument_error(_validation_message(exc)))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 404:
            error = ApiError(RetCode.NOT_FOUND, f"no route {request.method} {request.url.path}", status=404)
        elif exc.status_code == 405:
            error = ApiError(RetCode.ARGUMENT_ERROR, f"method {request.method} is not allowed on {request.url.path}",
                             status=405)
        elif exc.status_code == 400:        # FastAPI could not read the body (nested too deeply, say)
            cause = exc.__cause__
            why = f": {type(cause).__name__}" if cause is not None else ""
            error = ApiError(RetCode.ARGUMENT_ERROR, f"the request body cannot be read as JSON{why}", status=400)
        else:
            error = ApiError(exc.status_code, str(exc.detail), status=exc.status_code)
        # unknown routes and methods are HTTP-level errors: keep their status for every client
        return JSONResponse(error.body(), status_code=error.status)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception):
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        error = ApiError(RetCode.SERVER_ERROR, f"internal error: {type(exc).__name__}: {exc}", status=500)
        return error_response(request, error)
