"""Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

from typing import Dict, Optional

from fastapi.responses import JSONResponse


class ApiError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: Optional[str] = None, code: Optional[str] = None, headers: Optional[Dict[str, str]] = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code
        self.headers = headers

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, self.type, self.param, self.code, self.headers)


def error_response(status: int, message: str, type_: str = "invalid_request_error", param: Optional[str] = None,
                   code: Optional[str] = None, headers: Optional[Dict[str, str]] = None) -> JSONResponse:
    return JSONResponse(status_code=status, headers=headers,
                        content={"error": {"message": message, "type": type_, "param": param, "code": code}})


def queue_full(message: str) -> ApiError:
    """429 for a model whose waiting line is full; clients retry after a second."""
    return ApiError(429, message, "rate_limit_error", code="queue_full", headers={"Retry-After": "1"})
