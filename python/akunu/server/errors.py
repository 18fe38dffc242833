"""Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

from typing import Optional

from fastapi.responses import JSONResponse


class ApiError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: Optional[str] = None, code: Optional[str] = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, self.type, self.param, self.code)


def error_response(status: int, message: str, type_: str = "invalid_request_error", param: Optional[str] = None,
                   code: Optional[str] = None) -> JSONResponse:
    return JSONResponse(status_code=status,
                        content={"error": {"message": message, "type": type_, "param": param, "code": code}})
