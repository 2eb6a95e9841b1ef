"""Errors the tools raise for input a user can fix (the MCP layer turns them into tool errors)."""
from __future__ import annotations


class InputError(ValueError):
    """The input cannot be read at all (missing path, a directory, permission); names it and the fix."""


class FamilyError(ValueError):
    """Unknown operation, missing input for an operation that needs one, or an unknown GPU; names the fix."""
