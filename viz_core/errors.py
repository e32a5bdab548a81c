"""Errors that a page shows to the user as a translated message instead of a traceback."""
from __future__ import annotations

import logging
import uuid


class InputError(ValueError):
    """Bad user input. code is a full i18n key ("attention.empty_text"); params fill its {placeholders}.

    The English text (for logs, the CLI and tests) is the message; pages translate code via viz_core.i18n.
    """

    def __init__(self, code: str, message: str = "", **params):
        self.code, self.params = code, params
        super().__init__(message or code)


def report_unexpected(exc: BaseException, where: str = "") -> str:
    """Log an unexpected error with its traceback on the server and return a short id to show the user instead.

    The page shows only a generic, translated message with this id (never str(exc): it can hold server paths and
    library internals); whoever runs the server finds the full traceback in the log by the id.
    """
    error_id = uuid.uuid4().hex[:8]
    logging.getLogger(__name__).error("unexpected error %s%s: %s", error_id, f" in {where}" if where else "",
                                      type(exc).__name__, exc_info=(type(exc), exc, exc.__traceback__))
    return error_id
