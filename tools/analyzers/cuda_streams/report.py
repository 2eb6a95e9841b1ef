"""Stream-safety findings and reports: the result types, the sources they cite, summary and order."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


# Sources: the PyTorch stream-semantics pages and the issues and pull requests that show each mechanism.
SRC_RECORD_STREAM = "https://pytorch.org/docs/stable/generated/torch.Tensor.record_stream.html"
SRC_CUDA_STREAMS = "https://pytorch.org/docs/stable/notes/cuda.html#cuda-streams"
SRC_DS_8061 = "https://github.com/deepspeedai/DeepSpeed/issues/8061"
SRC_TORCHTITAN_735 = "https://github.com/pytorch/torchtitan/issues/735"
SRC_PT_188655 = "https://github.com/pytorch/pytorch/issues/188655"
SRC_VERL_6976 = "https://github.com/verl-project/verl/pull/6976"

Severity = Literal["high", "medium", "low", "info"]
SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}



class StreamFinding(BaseModel):
    """One stream-safety risk (or note) found by a heuristic check.

    ``check`` names the check; each is documented at the top of its module in this package (side_use,
    missing_wait, non_blocking, record_current, async_collectives for code; config for config facts).
    """

    check: str = Field(description="Check id, e.g. side_stream_use_without_record_stream.")
    severity: Severity = Field(description="high / medium / low risk, or info (not a risk by itself).")
    line: int | None = Field(None, description="1-based line where the finding starts (None for config facts).")
    end_line: int | None = Field(None, description="1-based last line of the finding's span.")
    message: str = Field(description="What was seen and why it is a risk.")
    fix: str = Field(description="The concrete change.")
    source: str = Field(description="Public URL backing the mechanism (an issue, PR or PyTorch docs page).")


class StreamReport(BaseModel):
    """Result of :func:`analyze_code` or :func:`analyze_config`. Heuristic; see the module docstring."""

    findings: list[StreamFinding] = Field(default_factory=list, description="Most severe first, then by line.")
    streams: list[str] = Field(
        default_factory=list,
        description="Side streams seen: targets of torch.cuda.Stream(...) and arguments of stream blocks.",
    )
    blocks: int = Field(0, description="Number of side-stream blocks (`with torch.cuda.stream(s):`).")
    error: str | None = Field(None, description="Why the input could not be analysed (e.g. a syntax error), else None.")
    summary: str = Field("", description="One sentence.")



def summarize(findings: list[StreamFinding], where: str, risk_where: str = "") -> str:
    """'2 risks: 1 high, 1 medium[ in ...][ (1 note)]' or 'no stream-safety risk found in ...'."""
    risks = [f for f in findings if f.severity != "info"]
    notes = len(findings) - len(risks)
    note_txt = f" ({notes} note{'s' if notes != 1 else ''})" if notes else ""
    if not risks:
        return f"no stream-safety risk found in {where}{note_txt}"
    counts = [f"{sum(f.severity == s for f in risks)} {s}" for s in ("high", "medium", "low")]
    counts = [c for c in counts if not c.startswith("0 ")]
    return f"{len(risks)} risk{'s' if len(risks) != 1 else ''}: {', '.join(counts)}{risk_where}{note_txt}"


def by_severity(findings: list[StreamFinding]) -> list[StreamFinding]:
    """Most severe first, then by line and check."""
    return sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.line or 0, f.check))
