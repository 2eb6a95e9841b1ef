"""Resource limits a probe child process sets on itself first thing (the tokenizer and numerics children).

A hostile tokenizer.json whose normalizer multiplies its input, or a torch build that misbehaves, must end as a
clear "unknown", not take the machine's memory or a core for minutes. The child lowers its own soft limits
(no ``preexec_fn``: the server that starts it has threads); the parent also keeps a wall-clock timeout.

- memory: ``RLIMIT_DATA`` (heap and private writable mappings; address-space reservations of allocator arenas
  and CUDA do not count, which ``RLIMIT_AS`` would refuse). Python answers a MemoryError, Rust aborts the child
  ("memory allocation of N bytes failed"): either way the parent reads the child's death as the answer;
- CPU: ``RLIMIT_CPU`` seconds (SIGXCPU ends the child).
"""
from __future__ import annotations

import resource

TOKENIZER_MEM_MB = 512
TOKENIZER_CPU_S = 12


def limit_self(mem_mb: int | None, cpu_s: int | None) -> None:
    """Lower this process's soft RLIMIT_DATA to ``mem_mb`` MB and RLIMIT_CPU to ``cpu_s`` seconds (None: leave
    it); never above the hard limit, never raises (a platform without the limit keeps going)."""
    for which, value in ((getattr(resource, "RLIMIT_DATA", None), mem_mb * 2**20 if mem_mb else None),
                         (getattr(resource, "RLIMIT_CPU", None), cpu_s)):
        if which is None or value is None:
            continue
        try:
            _soft, hard = resource.getrlimit(which)
            resource.setrlimit(which, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))
        except (ValueError, OSError):
            pass


def died_of(returncode: int, mem_mb: int | None, cpu_s: int | None) -> str:
    """Why a child ended with ``returncode``, in words: a negative code is a signal (SIGABRT/SIGSEGV/SIGKILL
    after an allocation failed at the memory limit, SIGXCPU at the CPU limit)."""
    import signal

    if returncode >= 0:
        return f"exit {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    if name == "SIGXCPU":
        return f"{name}: past its {cpu_s} s CPU limit"
    if name in ("SIGABRT", "SIGSEGV", "SIGKILL", "SIGBUS") and mem_mb:
        return f"{name}: most likely past its {mem_mb} MB memory limit"
    return name
