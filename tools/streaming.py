"""Large or compressed logs read in bounded memory: the streamed input of :func:`grpo_debug.tools.triage.triage_stream`.

tools/engine/large_logs.py scans the file with the multi-pattern prefilter and keeps the candidate lines;
this module turns them into the pipeline's :class:`Context` (events, metric series, config facts) and says
in ``skipped`` what was not kept. The rules and the ranking then run unchanged (tools/triage.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from grpo_debug.tools.errors import InputError


@dataclass
class Streamed:
    """What reading a large log produced: the context, the kept lines, notes on what was not kept, and the
    whole input's line and byte counts."""

    ctx: object
    lines: list
    skipped: list[str] = field(default_factory=list)
    total_lines: int = 0
    bytes_read: int = 0


def _events(lines: list) -> list:
    """Pattern events plus every traceback and error line classified, in line order (as tools/triage.py does)."""
    from grpo_debug.tools.engine.errors_classify import error_events
    from grpo_debug.tools.engine.events import extract_events

    evs = extract_events(lines) + error_events(lines)
    evs.sort(key=lambda e: (e.line, e.kind != "traceback"))
    return evs


def read_streamed(path, rb, *, progress=None, label: str | None = None) -> Streamed:
    """Read a large or compressed log (a path, or a binary stream) with the prefilter of ``rb``'s regex signals.

    ``progress(bytes_done, bytes_total)`` is called after each chunk. Raises InputError for an unreadable or
    undecodable (e.g. zstd without the zstandard package) file."""
    from grpo_debug.skills.schema import RegexSignal
    from grpo_debug.tools.engine.facts import extract_facts
    from grpo_debug.tools.engine.large_logs import scan_file, scan_stream
    from grpo_debug.tools.engine.match import Context
    from grpo_debug.tools.engine.metrics import extract_metrics
    from grpo_debug.tools.engine.normalize import normalize_line

    pats = [sig.pattern for r in rb for sig in r.match.signals() if isinstance(sig, RegexSignal)]
    try:
        if hasattr(path, "read"):  # an in-memory text with too many lines (see triage)
            sparse = scan_stream(path, pats, progress=progress)
        else:
            sparse = scan_file(path, pats, progress=progress)
    except (OSError, ValueError, EOFError) as e:
        raise InputError(f"{label or path}: cannot read: {e}") from e
    lines = [normalize_line(raw.replace("\x00", ""), no) for no, raw in sparse.lines]
    metrics = extract_metrics(lines)
    ctx = Context(lines=lines, events=_events(lines), metrics=metrics, facts=extract_facts(lines, skip=metrics.lines))
    skipped = [f"streamed with the {sparse.engine} prefilter: {len(lines)} of {sparse.total_lines} lines kept "
               "(metric, event and command lines, tracebacks, the first 3000 and last 1000 lines)"]
    if sparse.engine == "re":
        skipped.append("neither hyperscan nor google-re2 is installed: pip install 'grpo-debug[fast]' for grep-like speed")
    if sparse.unprefiltered:
        skipped.append(f"{len(sparse.unprefiltered)} rule pattern(s) could not be prefiltered; lines matching only "
                       "them were not read: " + "; ".join(p[:60] for p in sparse.unprefiltered[:3]))
    if sparse.truncated:
        skipped.append("more than 400000 candidate lines: the rest were counted but not kept")
    if sparse.capped:
        skipped.append(f"only the first {sparse.capped // 2**20} MiB (decompressed) were read: the input cap")
    return Streamed(ctx=ctx, lines=lines, skipped=skipped, total_lines=sparse.total_lines, bytes_read=sparse.bytes_read)
