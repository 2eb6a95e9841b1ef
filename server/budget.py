"""Answer limits of the MCP surface: pasted text is refused above a size, and every answer is cut to a
byte budget (evidence per finding, excerpt and prose lengths, then whole items from the least likely end),
saying so in the answer. The CLI is the user's own shell and has none of these limits."""
from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from grpo_debug.tools.models import FamilyReport, Finding, ProbeResult, TriageResult

# ---- limits of the MCP surface (the CLI is the user's own shell and has none of these) -------------------
MAX_TEXT_BYTES = 16 * 2**20      # pasted text above this is refused, naming the limit
MAX_ANSWER_BYTES = 28_000        # compact JSON of one answer (the SDK adds an indented text copy: < ~36 kB)
MAX_EVIDENCE = 8                 # evidence lines per finding
MAX_EXCERPT_CHARS = 300          # one evidence / sample line
MAX_PROSE_CHARS = 1_500          # why / fix / body texts
MAX_ITEMS = 40                   # items of a family report


def _check_text(text: str | None, arg: str = "text") -> None:
    """Refuse pasted text above MAX_TEXT_BYTES, naming the limit."""
    if text is None or len(text) * 4 <= MAX_TEXT_BYTES:  # a str char is at most 4 UTF-8 bytes
        return
    n = len(text) if len(text) > MAX_TEXT_BYTES else len(text.encode("utf-8", "surrogatepass"))
    if n > MAX_TEXT_BYTES:
        raise ToolError(f"`{arg}` is {n / 2**20:.1f} MiB; the limit for pasted text is "
                        f"{MAX_TEXT_BYTES // 2**20} MiB ({MAX_TEXT_BYTES} bytes). Save it to a file under an allowed "
                        "folder and give `path` instead (files are read up to 256 MiB), or paste the part around "
                        "the first error")


# ---- bounding answers ------------------------------------------------------------------------------------

def _clip(s: str, n: int) -> tuple[str, bool]:
    if not isinstance(s, str) or len(s) <= n:
        return s, False
    return s[: n - 1] + "\u2026", True


def _clip_strings(x: Any, n: int) -> tuple[Any, bool]:
    """Every string inside a JSON-like value clipped to n characters (lists cut to 100 items)."""
    if isinstance(x, str):
        return _clip(x, n)
    if isinstance(x, dict):
        cut = False
        out = {}
        for k, v in x.items():
            out[k], c = _clip_strings(v, n)
            cut |= c
        return out, cut
    if isinstance(x, list):
        cut = len(x) > 100
        out = []
        for v in x[:100]:
            v, c = _clip_strings(v, n)
            out.append(v)
            cut |= c
        return out, cut
    return x, False


def _size(m: BaseModel | Any) -> int:
    if isinstance(m, BaseModel):
        return len(m.model_dump_json())
    return len(json.dumps(m, default=str))


def _bound_finding(f: Finding) -> bool:
    cut = len(f.evidence) > MAX_EVIDENCE or len(f.causes) > 4 or len(f.edits) > 10 or len(f.settings) > 10
    f.evidence = f.evidence[:MAX_EVIDENCE]
    for ev in f.evidence:
        ev.text, c = _clip(ev.text, MAX_EXCERPT_CHARS)
        cut |= c
    f.causes = f.causes[:4]
    for c_ in f.causes:
        c_.why, a = _clip(c_.why, MAX_PROSE_CHARS)
        c_.fix, b = _clip(c_.fix, MAX_PROSE_CHARS)
        c_.matched = [_clip(m, MAX_EXCERPT_CHARS)[0] for m in c_.matched[:6]]
        cut |= a or b
    f.fix, c = _clip(f.fix, MAX_PROSE_CHARS)
    cut |= c
    f.edits = f.edits[:10]
    for e in f.edits:
        e.old = _clip(e.old, MAX_EXCERPT_CHARS)[0] if e.old else e.old
        e.new = _clip(e.new, MAX_EXCERPT_CHARS)[0]
    f.settings = f.settings[:10]
    f.next_checks = [_clip(x, MAX_EXCERPT_CHARS)[0] for x in f.next_checks[:6]]
    f.sharpen = [_clip(x, MAX_EXCERPT_CHARS)[0] for x in f.sharpen[:6]]
    return cut


def _drop_to_budget(seq: list, total: int, keep: int = 1) -> tuple[int, int]:
    """Pop items off the end of seq until total (its owner's JSON size) fits; returns (new total, dropped)."""
    dropped = 0
    while total > MAX_ANSWER_BYTES and len(seq) > keep:
        total -= _size(seq.pop()) + 1
        dropped += 1
    return total, dropped


def bound_triage(res: TriageResult) -> TriageResult:
    """A TriageResult cut to the answer budget: evidence per finding, excerpt and prose lengths, then the metric
    series no finding (nor the summary) names, then whole findings from the least likely end, then the other
    series; ``truncated`` says when anything was cut."""
    cut = any([_bound_finding(f) for f in res.findings])
    cov = res.coverage
    for ev in cov.not_understood_sample:
        ev.text = _clip(ev.text, MAX_EXCERPT_CHARS)[0]
    cov.skipped = [_clip(x, MAX_EXCERPT_CHARS)[0] for x in cov.skipped[:10]]
    cov.unknown_config_keys = [_clip(x, 200)[0] for x in cov.unknown_config_keys[:50]]
    cov.input = _clip(cov.input, 500)[0]
    res.summary = _clip(res.summary, 2 * MAX_PROSE_CHARS)[0]
    if len(res.diff) > MAX_ANSWER_BYTES // 3:  # a cut diff does not apply: leave it out, the edits stay
        res.diff, cut = "", True
    total = _size(res)
    if total > MAX_ANSWER_BYTES and res.metrics:  # series that no finding names go before any finding
        named = res.summary + "".join(f.model_dump_json() for f in res.findings)
        for k in [k for k in reversed(list(res.metrics)) if k not in named]:
            if total <= MAX_ANSWER_BYTES:
                break
            total -= _size(res.metrics.pop(k)) + len(json.dumps(k)) + 2
            cut = True
    if total > MAX_ANSWER_BYTES:
        total, n = _drop_to_budget(res.findings, total)
        cut |= n > 0
    if total > MAX_ANSWER_BYTES and res.metrics:
        keys = list(res.metrics)
        while total > MAX_ANSWER_BYTES and keys:
            k = keys.pop()
            total -= _size(res.metrics.pop(k)) + len(json.dumps(k)) + 2
            cut = True
    res.truncated = bool(res.truncated or cut)
    return res


def bound_family(rep: FamilyReport) -> FamilyReport:
    """A FamilyReport cut to the answer budget: at most MAX_ITEMS items with clipped bodies and fields, bounded
    findings, then items from the end until it fits; each cut is said in ``notes`` ('truncated: ...')."""
    omitted = max(0, len(rep.items) - MAX_ITEMS)
    rep.items = rep.items[:MAX_ITEMS]
    clipped = 0
    for it in rep.items:
        it.body, c = _clip(it.body, MAX_PROSE_CHARS)
        it.fields, d = _clip_strings(it.fields, MAX_PROSE_CHARS // 2)
        clipped += bool(c or d)
    fcut = any([_bound_finding(f) for f in rep.findings])
    total = _size(rep)
    if total > MAX_ANSWER_BYTES:
        total, n = _drop_to_budget(rep.items, total, keep=0)
        omitted += n
    if total > MAX_ANSWER_BYTES:
        total, n = _drop_to_budget(rep.findings, total, keep=1)
        fcut |= n > 0
    if omitted:
        rep.notes.append(f"truncated: {omitted} items omitted (narrow the request with `text` to see them)")
    if clipped:
        rep.notes.append(f"truncated: long text of {clipped} items shortened")
    if fcut:
        rep.notes.append("truncated: findings or their evidence were cut to bound the answer size")
    return rep


def bound_probe(res: ProbeResult) -> ProbeResult:
    """A ProbeResult cut to the answer budget (long strings in the host/checkpoint/tokenizer/cluster reports
    clipped, findings bounded); the summary says when anything was cut."""
    cut = any([_bound_finding(f) for f in res.findings])
    if _size(res) > MAX_ANSWER_BYTES:
        for name in ("host", "cluster", "checkpoint", "tokenizer", "memory", "facts"):
            val = getattr(res, name)
            if val:
                val, c = _clip_strings(val, 300)
                setattr(res, name, val)
                cut |= c
    if _size(res) > MAX_ANSWER_BYTES:
        for name in ("cluster", "host"):  # the raw reports; the flat facts and findings stay
            if getattr(res, name) and _size(res) > MAX_ANSWER_BYTES:
                setattr(res, name, {"truncated": True, "note": f"the {name} report was too large for one answer; "
                                                               "run `grpo-debug probe --format json` on the host"})
                cut = True
    if _size(res) > MAX_ANSWER_BYTES:
        _drop_to_budget(res.findings, _size(res))
        cut = True
    if cut:
        res.summary += " (truncated: some report text was cut to bound the answer size)"
    return res
