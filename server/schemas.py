"""The JSON schemas the MCP tool list publishes: argument types the SDK handles as meant, and compact,
shallow schemas (the tool list sits in every agent's context)."""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from grpo_debug.tools.models import TriageResult


def _none_to_empty(v: Any) -> Any:
    return "" if v is None else v


# A string argument that may be omitted or null. Typed plain `str` (not `str | None`) on purpose: the SDK
# json-decodes string arguments whose annotation is not exactly `str`, which turned a pasted JSON config into
# a dict and failed validation.
OptStr = Annotated[str, BeforeValidator(_none_to_empty)]


class TriageAnswer(TriageResult):
    """The MCP answer of ``triage`` and ``check_config``: a TriageResult (every field the CLI's JSON has), concise
    by default (server/concise.py: the top finding complete, the others one line each, the series they involve)."""

    more: str = Field("", description="What a concise answer left out and how to get it (detail='full'); '' in a "
                                      "full answer.")


def compact_schema(schema: dict | None, *, descriptions: bool) -> dict | None:
    """A JSON schema without the per-property ``title`` keywords (and, for output schemas, without
    ``description`` and ``default``, and an array of shallow objects published as an array): nearly the same
    validation (the server validates against the full models), a fraction of the bytes in every agent's context.
    A property *named* title/description (whose value is a schema object) is kept."""
    if schema is None:
        return None

    def walk(x):
        if isinstance(x, dict):
            if not descriptions and x.get("type") == "array" and x.get("items") == {"type": "object"}:
                x = {k: v for k, v in x.items() if k != "items"}  # a shallow array of objects: said by the field
            return {k: walk(v) for k, v in x.items()
                    if not (k == "title" and isinstance(v, str))
                    and not (k in ("description", "default") and not descriptions and not isinstance(v, dict))}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x
    return walk(schema)


def shallow_schema(schema: dict | None, depth: int = 1) -> dict | None:
    """An output schema resolved to ``depth`` levels of nesting; deeper objects become
    ``{"type": "object"}``. It accepts every value the full schema accepts (the server still validates
    results against the full pydantic model), at a fraction of the size."""
    if schema is None:
        return None
    defs = schema.get("$defs", {})

    def resolve(x):
        while isinstance(x, dict) and "$ref" in x:
            x = defs.get(x["$ref"].rsplit("/", 1)[-1], {"type": "object"})
        return x

    def walk(x, d):
        x = resolve(x)
        if not isinstance(x, dict):
            return x
        if "anyOf" in x:
            return {**{k: v for k, v in x.items() if k != "anyOf"}, "anyOf": [walk(v, d) for v in x["anyOf"]]}
        if x.get("type") == "object" or "properties" in x:
            if d >= depth:
                return {"type": "object"}
            out = {k: v for k, v in x.items() if k not in ("properties", "$defs", "additionalProperties")}
            if "properties" in x:
                out["properties"] = {k: walk(v, d + 1) for k, v in x["properties"].items()}
            if isinstance(x.get("additionalProperties"), dict):
                out["additionalProperties"] = walk(x["additionalProperties"], d + 1)
            return out
        if x.get("type") == "array" and "items" in x:
            return {**x, "items": walk(x["items"], d)}
        return x
    return walk({k: v for k, v in schema.items() if k != "$defs"}, 0)


def argument_errors(exc) -> str:
    """A pydantic ValidationError of tool arguments as one line per field: the field, what was given and what
    is accepted (for an enum, the allowed values)."""
    out = []
    for e in exc.errors(include_url=False)[:5]:
        field = ".".join(str(x) for x in e.get("loc", ())) or "arguments"
        given = repr(e.get("input"))[:60]
        if e.get("type") == "literal_error":
            out.append(f"`{field}`: {given} is not allowed; use one of {e.get('ctx', {}).get('expected', '')}")
        else:
            out.append(f"`{field}`: {e.get('msg', 'invalid')} (given {given})")
    return "; ".join(out)
