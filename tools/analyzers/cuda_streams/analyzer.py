"""The code analyzer: every check mixed into one AST pass per function scope, and ``analyze_code``."""
from __future__ import annotations

import ast

from grpo_debug.tools.analyzers.cuda_streams.async_collectives import AsyncCollectivesCheck
from grpo_debug.tools.analyzers.cuda_streams.missing_wait import MissingWaitCheck
from grpo_debug.tools.analyzers.cuda_streams.non_blocking import NonBlockingCheck
from grpo_debug.tools.analyzers.cuda_streams.record_current import RecordCurrentCheck
from grpo_debug.tools.analyzers.cuda_streams.report import StreamReport, by_severity, summarize
from grpo_debug.tools.analyzers.cuda_streams.side_use import SideUseCheck


class Analyzer(SideUseCheck, MissingWaitCheck, NonBlockingCheck, RecordCurrentCheck, AsyncCollectivesCheck):
    """All code checks over one parsed module; ``run`` fills ``findings``."""

    def run(self) -> None:
        for sc in self.scopes():
            self.n_blocks += len(sc.blocks)
            for blk in sc.blocks:
                self._check_side_use(sc, blk)
                self._check_missing_wait(sc, blk)
            self._check_non_blocking(sc)
            self._check_record_current(sc)
            self._check_async_collectives(sc)


def analyze_code(source: str, filename: str = "<snippet>") -> StreamReport:
    """Statically check PyTorch source for CUDA stream-safety risks (heuristic; see module docstring).

    Recognises side-stream blocks (``with torch.cuda.stream(s):``, ``torch.cuda.StreamContext(s)``,
    ``stream(s)`` imported from ``torch.cuda``, aliases such as ``import torch as th``) and streams
    made with ``torch.cuda.Stream(...)``. Blocks on ``None`` or on the current/default stream are
    ignored. Findings are described on :class:`StreamFinding`. A syntax error gives a report with
    ``error`` set (naming the line). It never raises.
    """
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        err = f"{filename}: syntax error at line {e.lineno}: {e.msg}"
        return StreamReport(error=err, summary=f"could not analyse {filename}: syntax error at line {e.lineno}")
    except (ValueError, RecursionError) as e:  # e.g. null bytes, absurd nesting
        return StreamReport(error=f"{filename}: {e}", summary=f"could not analyse {filename}: {e}")
    an = Analyzer(tree)
    an.run()
    findings = by_severity(an.findings)
    blocks_txt = f"{an.n_blocks} side-stream block{'s' if an.n_blocks != 1 else ''}"
    where = blocks_txt if an.n_blocks else "code with no side-stream block"
    summary = summarize(findings, where, f" ({blocks_txt})" if an.n_blocks else "")
    return StreamReport(findings=findings, streams=an.streams, blocks=an.n_blocks, summary=summary)
