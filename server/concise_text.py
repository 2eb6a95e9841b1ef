"""The text block of an MCP triage answer, rendered from its structured content (server/concise.py): compact
lines, no JSON, nothing said twice. The first finding is written out in full, the others one line each in a
concise answer (every finding in full with detail='full'); then the causal chain, the series, the coverage and
what was left out."""
from __future__ import annotations

from typing import Any

from grpo_debug.tools.render.concise import signal_words

def _num(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return str(v)
        return f"{v:.4g}" if (abs(v) >= 1e-3 or v == 0) else f"{v:.3e}"
    return str(v)


def _onset(o: Any, given: str = "") -> str:
    """'onset step 204, L3721 of train.log' from an onset object (any of step, line, file)."""
    if not isinstance(o, dict) or not o:
        return ""
    parts = []
    if o.get("step") is not None:
        what = " ".join(str(o[k]) for k in ("series", "kind") if o.get(k))
        parts.append(f"step {_num(o['step'])}" + (f" ({what})" if what else ""))
    if o.get("line") is not None:
        parts.append(f"L{o['line']}" + (f" of {o['file']}" if o.get("file") and o["file"] != given else ""))
    elif o.get("file"):
        parts.append(str(o["file"]))
    return "onset " + ", ".join(parts) if parts else ""


def _evidence_lines(evidence: list[dict]) -> list[str]:
    out, last = [], None
    for e in evidence:
        src = e.get("source")
        tag = f" [{src}]" if src and src != last else ""
        last = src
        out.append(f"  L{e['line']}{tag}: {e['text']}")
    return out


def _head(i: int, f: dict, given: str = "") -> str:
    bits = [f"{i}. {'risk ' if f.get('risk') else ''}{f['symptom']} ({f['confidence']})"]
    if on := _onset(f.get("onset"), given):  # the file only when it is not the input itself
        bits.append(on)
    if f.get("consequence_of") is not None:
        bits.append(f"follows from {int(f['consequence_of']) + 1}")
    if f.get("run"):
        bits.append(f"run {f['run']}")
    return " | ".join(bits) + f": {f['title']}"


def _causes(f: dict, full: bool) -> list[str]:
    out = []
    causes = f.get("causes") or []
    for j, c in enumerate(causes):
        if j and not full:
            break
        mark = "" if c.get("verified") else ", unverified source"
        title = f" ({c['title']})" if c.get("title") and c["title"] != f.get("title") else ""
        out.append(f" cause: {c['rule_id']}{title} [{c.get('confidence', 'medium')}{mark}]"
                   + (f": {c['why']}" if c.get("why") else ""))
        if full and c.get("fix") and c["fix"] != f.get("fix"):
            out.append(f"  its fix: {c['fix']}")
        sig = " signals: " + "; ".join(signal_words(c.get("matched") or [], 8 if full else 5))
        if c.get("matched") and sig not in out:  # causes that share their signals: said once
            out.append(sig)
    if not full and len(causes) > 1:
        out.append(" other causes: " + ", ".join(c["rule_id"] for c in causes[1:]))
    return out


def _edits(f: dict) -> list[str]:
    out = []
    for e in f.get("edits") or []:
        if e.get("line") is not None and e.get("old"):
            out.append(f" edit L{e['line']}: {e['old']}  =>  {e['new']}")
        else:
            out.append(f" add ({e.get('key', '')}): {e['new']}" + (f"  ({e['note']})" if e.get("note") else ""))
    if not out and f.get("patch"):
        out.append(" patch: " + ", ".join(f"{k}={v}" for k, v in f["patch"].items()))
    return out


def finding_block(i: int, f: dict, full: bool = False, given: str = "") -> list[str]:
    """A finding written out: head, evidence, cause(s) and signals, fix, edits, settings, next checks."""
    out = [_head(i, f, given), " evidence:"] + _evidence_lines(f.get("evidence") or [])
    out += _causes(f, full)
    out.append(f" fix: {f['fix']}")
    out += _edits(f)
    if f.get("settings"):
        out.append(" settings: " + "; ".join(f"{s['key']}={s['value']!r} (L{s['line']})" for s in f["settings"]))
    for label, key in (("next", "next_checks"), ("would sharpen", "sharpen")):
        if f.get(key):
            out.append(f" {label}: " + "; ".join(f[key]))
    return out


def finding_line(i: int, f: dict, given: str = "") -> str:
    """Another finding on one line: head, first evidence line, rule id, fix."""
    bits = [_head(i, f, given)]
    if f.get("evidence"):
        e = f["evidence"][0]
        bits.append(f"L{e['line']}: {e['text']}")
    if f.get("causes"):
        bits.append(f"rule {f['causes'][0]['rule_id']}")
    bits.append(f"fix: {f['fix']}")
    return " | ".join(bits)


def chain_line(findings: list[dict]) -> str | None:
    """'chain: 1 nan_inf -> 2 grad_norm_spike, 3 reward_zero' from the findings' consequence_of (None if none)."""
    kids: dict[int, list[int]] = {}
    for i, f in enumerate(findings):
        c = f.get("consequence_of")
        if isinstance(c, int) and 0 <= c < len(findings) and c != i:
            kids.setdefault(c, []).append(i)
    if not kids:
        return None
    name = lambda i: f"{i + 1} {findings[i]['symptom']}"  # noqa: E731
    return "chain: " + "; ".join(f"{name(p)} -> " + ", ".join(name(k) for k in ks) for p, ks in kids.items())


def series_line(key: str, s: dict) -> str:
    """One metric series: points, steps, first -> last, range, the first non-finite point."""
    line = f"  {key}: {s.get('points', 0)} pts"
    if s.get("first_step") is not None:
        line += f", steps {_num(s['first_step'])}-{_num(s.get('last_step'))}"
    nonfinite = s.get("first_nonfinite_step") is not None or s.get("first_nonfinite_line") is not None
    last = s.get("last")
    line += f", {_num(s.get('first'))} -> {'nan/inf' if last is None and nonfinite else _num(last)}"
    if s.get("min") is not None:
        line += f", min {_num(s['min'])} max {_num(s.get('max'))}"
    if nonfinite:
        line += f", non-finite from step {_num(s.get('first_nonfinite_step'))}"
        if s.get("first_nonfinite_line") is not None:
            line += f" (L{s['first_nonfinite_line']})"
    return line


def coverage_lines(c: dict, full: bool) -> list[str]:
    """What was read (counts and formats), skipped, versions, files; with ``full`` the lists too."""
    out = [f"coverage: {c.get('lines_read', 0)} lines ({c.get('bytes_read', 0)} bytes) of {c.get('input', '')}; "
           f"formats: {', '.join(c.get('formats') or []) or 'none recognised'}; {c.get('metric_lines', 0)} metric, "
           f"{c.get('event_lines', 0)} event lines, {c.get('config_facts', 0)} config facts, "
           f"{c.get('lines_not_understood', 0)} not understood"]
    for label, key in (("skipped", "skipped"), ("versions", "versions"), ("files", "files")):
        if c.get(key):
            out.append(f" {label}: " + "; ".join(c[key]))
    if full:
        if c.get("unknown_config_keys"):
            out.append(" config keys no rule reads: " + ", ".join(c["unknown_config_keys"]))
        if c.get("not_understood_sample"):
            out.append(" not understood:")
            out += _evidence_lines(c["not_understood_sample"])
    return out


def render_answer(d: dict, tool: str = "triage", summary: str | None = None, full: bool = False) -> str:
    """The text block of a triage/check_config answer ``d`` (its structured content, concise or full);
    ``summary``: the summary to print instead of ``d``'s (a full answer's repeats its top finding); ``full``:
    every finding written out and every coverage list."""
    fs = d.get("findings") or []
    head = f"{tool}: " + (f"{d['verdict']} | " if d.get("verdict") else "") + f"{len(fs)} finding{'s' * (len(fs) != 1)}"
    out = [head + (" (truncated)" if d.get("truncated") and full else ""),
           d.get("summary", "") if summary is None else summary]
    for i, f in enumerate(fs, 1):
        given = (d.get("coverage") or {}).get("input", "")
        out += finding_block(i, f, full, given) if (i == 1 or full) else [finding_line(i, f, given)]
    if (chain := chain_line(fs)) and "Chain:" not in (d.get("summary") or ""):  # said once
        out.append(chain)
    for r in d.get("runs") or []:
        if isinstance(r, dict):
            syms = ", ".join(x.get("symptom", "?") for x in r.get("findings") or [] if isinstance(x, dict))
            scal = ", ".join(f"{k}={v}" for k, v in r.items() if k != "findings" and v not in (None, "", [], {}))
            out.append(f"run: {scal}" + (f"; findings: {syms}" if syms else ""))
    if d.get("metrics"):
        out.append("metrics:")
        out += [series_line(k, s) for k, s in d["metrics"].items()]
    out += coverage_lines(d.get("coverage") or {}, full)
    if d.get("diff"):
        out += ["diff:", d["diff"].rstrip("\n")]
    if d.get("more"):
        out.append(f"more: {d['more']}")
    return "\n".join(x for x in out if x)
