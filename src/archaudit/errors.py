"""The one base of archaudit's exceptions.

Every error archaudit raises on purpose derives from ArchauditError: a reader's error names the
finding code it becomes (E0xx), a usage or configuration error ends the command with exit 2.
Anything else that escapes is an internal error (exit 2, one line).
"""

from __future__ import annotations

from .findings import Code


class ArchauditError(Exception):
    """An error archaudit raises on purpose: a message, the finding code it stands for, and
    where in the file it was met (readers), given by keyword so no caller mixes them up."""

    default_code: Code = Code.E099

    def __init__(self, message: str, *, code: Code | None = None, offset: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else self.default_code
        self.offset = offset


class UsageError(ArchauditError):
    """Bad flags, configuration or claim: the command ends with exit 2 and the message (its code
    is never reported: a usage error is not a finding)."""


__all__ = ["ArchauditError", "UsageError"]
