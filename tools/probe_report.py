"""The probe surface: host facts (and optional numerics, checkpoint, tokenizer, memory estimate, Ray
cluster) in one typed result, with the rule base evaluated over the host facts (``probe`` signals).

Pure orchestration over grpo_debug.probes; heavy imports (torch, ray, pynvml, tokenizers) stay inside the
probes that need them.
"""
from __future__ import annotations

from typing import Any

from grpo_debug.skills.loader import RuleBase, probe_rules
from grpo_debug.tools.models import Finding, ProbeResult


def findings_from_probe_facts(facts: dict[str, Any], config_text: str = "", rules: RuleBase | None = None) -> list[Finding]:
    """Evaluate the rule base over probe facts (keys 'probe.x' -> signal fact 'x'), optionally together with
    a config/launch text (rules that combine a setting with a host fact, e.g. bf16 on a GPU without bf16)."""
    from grpo_debug.tools.engine.match import evaluate
    from grpo_debug.tools.triage import _group, build_context

    rb = rules or probe_rules()  # only the rules with a probe signal are evaluated: parse only those
    ctx, lines = build_context(config_text)
    ctx.probe = {k[len("probe."):]: v for k, v in facts.items() if k.startswith("probe.")}
    hits = [h for r in rb if any(s.kind == "probe" for s in r.match.signals()) and (h := evaluate(r, ctx)) is not None]
    return [f for f, _ in _group(hits, ctx, lines)]


def unknown_gpu(name: str) -> str | None:
    """The refusal for a GPU the spec table does not hold, with the list to choose from; None when known."""
    from grpo_debug.skills.knowledge import find_gpu, gpu_specs

    return None if find_gpu(name) else f"unknown GPU {name!r}; use one of: {', '.join(sorted(gpu_specs()))}"


def _dump(x: Any) -> dict[str, Any] | None:
    if x is None:
        return None
    return x.model_dump(mode="json") if hasattr(x, "model_dump") else {"value": x}


def run_probe(*, numerics: bool = False, device: str = "cpu", force: bool = False, checkpoint: str | None = None,
              tokenizer: str | None = None, stop: list[str] | None = None, estimate: dict[str, Any] | None = None,
              ray_address: str | None = None, config_text: str = "", host: bool = True) -> ProbeResult:
    """Collect the requested probes. Never raises for a missing tool/library/GPU (those facts are unknown)."""
    from grpo_debug.probes.collect import collect_host, host_facts

    out = ProbeResult(summary="")
    parts = []
    if host:
        rep = collect_host(numerics=numerics, device=device, force=force)
        out.facts = host_facts(rep)
        out.host = rep.model_dump(mode="json")
        out.findings = findings_from_probe_facts(out.facts, config_text)
        gpus = out.facts.get("probe.gpu_count", 0)
        parts.append(f"host: {gpus or 'no'} NVIDIA GPU(s) visible, torch {out.facts.get('probe.torch_version', 'not installed')}, "
                     f"open-file limit {out.facts.get('probe.ulimit_nofile', 'unknown')}, /dev/shm "
                     f"{out.facts.get('probe.dev_shm_gib', 'unknown')} GiB")
        if numerics and "probe.fp16_exp_overflow" in out.facts:
            parts.append(f"fp16 exp overflows above x = {out.facts['probe.fp16_exp_overflow']}")
    if checkpoint:
        from grpo_debug.probes.checkpoint import inspect_checkpoint

        c = inspect_checkpoint(checkpoint)
        out.checkpoint = _dump(c)
        issues = (out.checkpoint or {}).get("issues") or []
        parts.append(f"checkpoint {checkpoint}: {len(issues)} issue(s)")
    if tokenizer:
        from grpo_debug.probes.tokenizer import stop_token_ids

        t = stop_token_ids(tokenizer, stop or [])
        out.tokenizer = _dump(t)
        flag = (out.tokenizer or {}).get("slime_flag")
        parts.append(f"stop tokens: {flag}" if flag else "stop tokens: see tokenizer")
    if estimate is not None:
        from grpo_debug.probes.memory import estimate_memory

        m = estimate_memory(**estimate)
        out.memory = _dump(m)
        if out.memory and "total_gib" in out.memory:
            parts.append(f"memory estimate {out.memory['total_gib']:.1f} GiB per GPU: {out.memory.get('verdict')}")
        elif out.memory and out.memory.get("unknown"):
            parts.append(f"memory estimate unknown ({out.memory.get('reason')})")
    if ray_address:
        from grpo_debug.probes.cluster import probe_cluster

        out.cluster = _dump(probe_cluster(ray_address))
        parts.append((out.cluster or {}).get("summary", "cluster: no answer"))
    n = len(out.findings)
    out.summary = "; ".join(parts) + (f". {n} finding(s) from the host facts." if host else ".")
    return redact_probe(out)


def redact_probe(res: ProbeResult) -> ProbeResult:
    """``res`` with every secret (tools/redact.py) redacted in every field: the host's environment variables
    (RAY_CLIENT_AUTH, VLLM_PASSWD, the password in RAY_ADDRESS=ray://user:pw@...), the cluster's address, the
    reports' texts and the findings' evidence. The rules have already read the real values; the text and JSON
    views (CLI and MCP) are built from the redacted result."""
    from grpo_debug.tools.redact import redact_mapping

    return ProbeResult.model_validate(redact_mapping(res.model_dump(mode="json")))
