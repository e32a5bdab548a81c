"""Errors that a page shows to the user as a translated message instead of a traceback."""
from __future__ import annotations


class InputError(ValueError):
    """Bad user input. code is a full i18n key ("attention.empty_text"); params fill its {placeholders}.

    The English text (for logs, the CLI and tests) is the message; pages translate code via viz_core.i18n.
    """

    def __init__(self, code: str, message: str = "", **params):
        self.code, self.params = code, params
        super().__init__(message or code)
