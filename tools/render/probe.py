"""Plain-text rendering of a ProbeResult (``grpo-debug probe``): summary, host report, findings, and the
checkpoint / tokenizer / memory / cluster reports as JSON blocks."""
from __future__ import annotations

import json

from grpo_debug.tools.models import ProbeResult


def render_probe_text(res: ProbeResult) -> str:
    """The probe result for a person: the host report as a table, findings with their fix, other reports."""
    out = [res.summary]
    if res.host is not None:
        from grpo_debug.probes.collect import HostReport, render_host_text

        host = render_host_text(HostReport.model_validate(res.host))
        out.append(host[:-1] if host.endswith("\n") else host)
    out += [f"* [{f.symptom}] {f.title} ({f.confidence})\n    fix: {f.fix}" for f in res.findings]
    for name in ("checkpoint", "tokenizer", "memory", "cluster"):
        val = getattr(res, name)
        if val is not None:
            out.append(f"\n{name}:\n" + json.dumps(val, indent=2, default=str))
    return "\n".join(out) + "\n"
