"""Jobs for tests/test_worker_pool.py, module-level so they travel by reference to the pool's worker processes
(which import this module by name: the test puts this folder on sys.path; pytest's importlib mode does not)."""
from __future__ import annotations

import os


def add(a, b):
    return {"sum": a + b, "pid": os.getpid()}


def open_fifo(path):
    with open(path, "rb") as f:  # plain open(): blocks in the kernel until a writer comes, which never does
        return f.read()


def grow(total_mb, step_mb=16):
    keep = []
    for _ in range(total_mb // step_mb):
        keep.append(bytearray(step_mb * 2**20))  # zero-filled: the pages are touched, RSS grows
    return len(keep)


def with_progress(n, progress=None):
    for i in range(1, n + 1):
        progress(i, n, "reading")
    return os.getpid()


def raise_value_error(msg):
    raise ValueError(msg)


def env(name):
    return os.environ.get(name)


def block_tool(path):
    return open_fifo(path)
