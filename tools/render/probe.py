"""Plain-text rendering of a ProbeResult (``grpo-debug probe``): summary, host report, findings, and the
checkpoint / tokenizer / memory / cluster reports as text for a person (``--format json`` has every field)."""
from __future__ import annotations

from typing import Any

from grpo_debug.tools.models import ProbeResult

#: Fields a person does not need in the text view (they stay in --format json).
_QUIET = {"summary", "issues", "components", "assumptions", "nodes", "differences", "path"}


def error_results(res: ProbeResult) -> list[str]:
    """The error-severity results of a probe (a missing shard, an unreachable cluster): the CLI exits 2 on any."""
    errs = [f"{name}: {i.get('message', '')}" for name in ("checkpoint", "tokenizer", "memory")
            for i in (getattr(res, name) or {}).get("issues") or [] if isinstance(i, dict) and i.get("severity") == "error"]
    if res.cluster and res.cluster.get("error"):
        errs.append(f"cluster: {res.cluster.get('summary') or res.cluster['error']}")
    if res.checkpoint and res.checkpoint.get("exists") is False:
        errs.append(f"checkpoint: {res.checkpoint.get('path')} does not exist")
    return errs


def _scalar(v: Any) -> str | None:
    """A value as one short text, or None when it is empty or too nested to show on one line."""
    if v is None or v == [] or v == {} or v == "":
        return None
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (str, int, bool)):
        return str(v)
    if isinstance(v, list) and all(isinstance(x, (str, int, float)) for x in v):
        shown = ", ".join(str(x) for x in v[:8])
        return shown + (f", ... ({len(v)} in all)" if len(v) > 8 else "")
    return None


def _fields(d: dict, indent: str = "  ") -> list[str]:
    out = []
    for k, v in d.items():
        if k in _QUIET:
            continue
        s = _scalar(v)
        if s is not None:
            out.append(f"{indent}{k.replace('_', ' ')}: {s}")
        elif isinstance(v, dict) and any(_scalar(x) is not None for x in v.values()):
            out.append(f"{indent}{k}:")
            out += _fields(v, indent + "  ")
    return out


def _issues(d: dict) -> list[str]:
    out = []
    for i in d.get("issues") or []:
        out.append(f"  [{i.get('severity', '?')}] {i.get('message', '')}")
        if i.get("fix"):
            out.append(f"      fix: {i['fix']}")
    return out


def _memory(m: dict) -> list[str]:
    out = [f"  {m.get('verdict', '')}"] if m.get("verdict") else []
    comps = m.get("components") or []
    if comps:
        w = max(len(c.get("name", "")) for c in comps)
        out += [f"  {c.get('name', ''):<{w}}  {c.get('gib', 0):8.2f} GiB  {c.get('formula', '')}" for c in comps]
        out.append(f"  {'total':<{w}}  {m.get('total_gib', 0):8.2f} GiB" + (
            f" of {m['gpu_memory_gib']:g} GiB ({m.get('gpu')})" if m.get("gpu_memory_gib") else ""))
    out += [f"  assumption: {a}" for a in m.get("assumptions") or []]
    return out


def _cluster(c: dict) -> list[str]:
    out = []  # the cluster's summary is the probe's summary, printed first
    for n in c.get("nodes") or []:
        out.append("  node " + ", ".join(f"{k}={_scalar(v)}" for k, v in n.items() if _scalar(v) is not None)[:300])
    out += [f"  differs: {_scalar(d) or d}" for d in c.get("differences") or []]
    return out


def render_probe_text(res: ProbeResult) -> str:
    """The probe result for a person: the host report as a table, findings with their fix, other reports."""
    out = [res.summary]
    if res.host is not None:
        from grpo_debug.probes.collect import HostReport, render_host_text

        host = render_host_text(HostReport.model_validate(res.host))
        out.append(host[:-1] if host.endswith("\n") else host)
    out += [f"* [{f.symptom}] {f.title} ({f.confidence})\n    fix: {f.fix}" for f in res.findings]
    if res.checkpoint is not None:
        out += ["", f"checkpoint {res.checkpoint.get('path', '')}:", *_issues(res.checkpoint), *_fields(res.checkpoint)]
    if res.tokenizer is not None:
        out += ["", "tokenizer:", *_issues(res.tokenizer), *_fields(res.tokenizer)]
    if res.memory is not None:
        out += ["", "memory estimate per GPU:", *_memory(res.memory)]
    if res.cluster is not None:
        out += ["", f"cluster {res.cluster.get('address', '')}:", *_cluster(res.cluster)]
    if any(getattr(res, n) is not None for n in ("checkpoint", "tokenizer", "memory", "cluster")):
        out.append("\n(every field: --format json)")
    return "\n".join(out) + "\n"
