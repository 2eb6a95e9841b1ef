"""The type of an error class (tools/engine/error_classes.py holds the table): a module of its own so the tables
in error_classes.py and error_classes_crash.py share it without importing each other."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ErrorClass:
    """One kind of error. Regexes are searched (case-sensitive unless they carry ``(?i)``) in:
    ``types``: the exception type (its last dotted part, and the inner type of a Ray wrapper);
    ``text``: ``"Type: message"`` of the record (or the error line itself) plus the messages of chained causes;
    ``frames``: the record's frames (``file:line in func`` and the source line shown under each);
    ``context``: up to 6 lines before the record. A test left empty always holds."""

    name: str
    symptom: str
    title: str
    cause: str
    check: str
    source: str
    examples: tuple[str, ...]
    text: str = ""
    types: str = ""
    frames: str = ""
    context: str = ""
    confidence: str = "medium"
    line_level: bool = False  # the text alone identifies it on a line without a Python exception
