"""The last step of every MCP tool answer: secrets redacted (tools/redact.py) in its text blocks, its structured
content and its error message, after the answer was bounded (server/budget.py). Line numbers, finding order,
counts and images are untouched; only strings that hold a secret change (the edits never rewrite such a line,
tools/engine/edits.py, so no applied answer writes ``***`` into a file)."""
from __future__ import annotations

from typing import Any

from grpo_debug.tools.redact import redact, redact_mapping


def redact_answer(result: Any) -> Any:
    """A tool's ``CallToolResult`` with its text blocks and structured content redacted (the same object,
    changed in place); any other value is returned as it is. Image blocks are not touched."""
    content = getattr(result, "content", None)
    if isinstance(content, list):
        for block in content:
            text = getattr(block, "text", None)
            if isinstance(text, str) and getattr(block, "type", "") == "text":
                new = redact(text)
                if new != text:
                    block.text = new
    structured = getattr(result, "structured_content", None)
    if isinstance(structured, dict):
        result.structured_content = redact_mapping(structured)
    return result


def redacted_message(message: str) -> str | None:
    """An error message with its secrets redacted, or None when it holds none."""
    new = redact(message)
    return None if new == message else new
