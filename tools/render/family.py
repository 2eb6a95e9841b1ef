"""Plain-text rendering of a FamilyReport (no rich, so the seed scripts need only pydantic and PyYAML)."""
from __future__ import annotations


def render_family_text(rep, width: int | None = None) -> str:
    """A FamilyReport (tools/families/) as plain text: summary, GPU, items, findings, notes."""
    import textwrap

    w = width or 100

    def wrap(s: str, indent: str) -> list[str]:
        return textwrap.wrap(" ".join(str(s).split()), width=max(40, w - len(indent)), initial_indent=indent,
                             subsequent_indent=indent, break_on_hyphens=False, break_long_words=False) or [indent]

    out = [f"grpo-debug {rep.family} {rep.operation}", *wrap(rep.summary, ""), ""]
    if rep.gpu is not None:
        g = rep.gpu
        out.append(f"GPU: {g.name} - {g.memory_gb:g} GB {g.memory_type}, {g.arch}, CC {g.compute_capability}, "
                   f"bf16 {'yes' if g.bf16 else 'no'}, fp8 {'yes' if g.fp8 else 'no'}, {g.interconnect}")
        out.append("")
    for i, it in enumerate(rep.items, 1):
        status = f" [{it.verification}]" if it.verification else ""
        out.append(f"{i}. [{it.kind}] {it.id}{status}: {it.title}")
        if it.body:
            out += wrap(it.body, "     ")
        f = it.fields
        if f.get("fix") and it.kind not in ("fix", "recommendation"):
            out += wrap("fix: " + str(f["fix"]), "     ")
        for k in ("steps", "per_framework", "causes"):
            for x in f.get(k) or []:
                if isinstance(x, dict):
                    x = x.get("title") or x.get("framework", "") + ": " + x.get("behaviour", "") if "framework" in x \
                        else f"{x.get('rule_id', '')}: {x.get('title', '')} -> {x.get('fix', '')}"
                out += wrap(f"- {x}", "       ")
        bugs = [b for b in f.get("bugs") or [] if isinstance(b, str)]
        if bugs:
            out += wrap("bugs: " + ", ".join(bugs), "     ")
        if f.get("result"):
            out += wrap("result: " + str(f["result"]), "     ")
        if f.get("severity"):
            out.append(f"     severity {f['severity']}, line {f.get('line')}")
        if f.get("patch"):
            out += wrap("patch: " + ", ".join(f"{k}={v}" for k, v in f["patch"].items()), "     ")
    for f in rep.findings:
        out.append(f"* [{f.symptom}] {f.title} ({f.confidence})")
        for e in f.evidence[:5]:
            out += wrap(f"L{e.line}: {e.text}", "     ")
        out += wrap("fix: " + f.fix, "     ")
        out += wrap("causes: " + ", ".join(c.rule_id for c in f.causes), "     ")
    for n in rep.notes:
        out += wrap("note: " + n, "")
    if rep.rules:
        out.append("")
        out += wrap("rules: " + ", ".join(dict.fromkeys(rep.rules)) + "  (read one: grpo-debug rule ID)", "")
    return "\n".join(out)
