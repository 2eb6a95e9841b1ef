"""``grpo-debug check --diff`` and ``--fix``: the check's edits as a unified diff on stdout, or written into
the file after a backup. The diff and the merged lines come from tools/engine/diff.py, so ``--fix`` writes
exactly what ``patch -p0 FILE < diff`` would."""
from __future__ import annotations

import sys
from typing import Callable

from grpo_debug.tools.models import TriageResult


def print_diff(result: TriageResult, err: Callable[[str], None]) -> int:
    """Write ``result.diff`` to stdout (raw when piped, so ``patch`` reads the file's own bytes; control
    characters shown as text on a terminal); each edit that has no place in the file goes to stderr."""
    from grpo_debug.tools.render.safe import terminal_safe

    left = [e for f in result.findings for e in f.edits if e.line is None]
    if result.diff:
        sys.stdout.write(terminal_safe(result.diff) if sys.stdout.isatty() else result.diff)
    else:
        err("no edit to make: " + ("no finding carries one" if not left else "none could be placed"))
    for e in left:
        err(f"not in the diff ({e.note}): {e.new}")
    return 0


def fix_file(path: str, result: TriageResult, out: Callable[[str], None]) -> int:
    """Write the edits into ``path`` after copying the file to ``path.orig`` (``path.orig.N`` when that
    exists); print the backup's path and the diff applied. The backup and the temporary file are created
    exclusively in the file's folder and the file is replaced by a rename (tools/safe_write.py): a link planted
    at any of those names is never written through, and the file keeps its mode. Raises ValueError when the
    file is a symlink or not a regular file, cannot be read as UTF-8, or changed while it was checked."""
    from grpo_debug.tools.engine.diff import apply_merged, merge_edits
    from grpo_debug.tools.safe_write import UnsafeWrite, read_regular, replace_file

    if not result.diff:
        out("no edit to make; the file is unchanged")
        return 0
    try:
        text = read_regular(path).decode("utf-8")
    except UnsafeWrite as e:
        raise ValueError(f"--fix: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--fix cannot read {path} as UTF-8 text: {getattr(e, 'strerror', None) or e}") from None
    new_text, stale = apply_merged(text, merge_edits([e for f in result.findings for e in f.edits])[0])
    if stale:
        raise ValueError(f"--fix: lines {stale} of {path} changed while checking; run the check again")
    try:
        backup = replace_file(path, new_text.encode("utf-8"), backup=True)
    except UnsafeWrite as e:
        raise ValueError(f"--fix: {e}") from None
    except OSError as e:
        raise ValueError(f"--fix cannot write {path}: {e.strerror or e}; the file is unchanged") from None
    out(f"fixed {path} (the original is kept as {backup}); the change:\n{result.diff}")
    return 0
