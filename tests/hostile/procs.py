"""Process-tree measures for the hostile tests (Linux /proc): the resident memory of a process and its descendants."""
from __future__ import annotations

from pathlib import Path


def tree_rss_mb(root: int, include_root: bool = True) -> dict[int, float]:
    """VmRSS (MB) of ``root`` (unless ``include_root`` is False) and every descendant, from /proc."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    tree, frontier = {root}, [root]
    while frontier:
        p = frontier.pop()
        for c, pp in parents.items():
            if pp == p and c not in tree:
                tree.add(c)
                frontier.append(c)
    if not include_root:
        tree.discard(root)
    out = {}
    for pid in tree:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out[pid] = int(line.split()[1]) / 1024
        except OSError:
            pass
    return out
