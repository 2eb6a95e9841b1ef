"""Which files of a run folder to read, and how: console logs, configs, launch scripts and metric stores.

``find_inputs(folder)`` walks with ``os.scandir`` (name order, at most ``max_depth`` folders down and
``max_entries`` directory entries looked at), never follows a symlinked folder and takes a symlinked file
only when it resolves inside the folder. Metric stores are found by ``tools.readers.find_stores``; the files
a store owns (a W&B run folder, event files, an SQLite database and its -wal/-shm, a csv_monitor job folder,
an MLflow ``mlruns`` tree) are not read again as text. Every file left out is named in ``skipped`` with the
reason (binary, too large, checkpoint or tokenizer file, unknown kind, a bound reached).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

LOG_EXT = (".log", ".out", ".err", ".txt", ".jsonl", ".log.gz", ".log.zst", ".out.gz", ".txt.gz")
CONFIG_EXT = (".yaml", ".yml", ".json")
SCRIPT_EXT = (".sh", ".bash", ".slurm", ".sbatch")
LOG_NAMES = ("stdout", "stderr", "output", "console", "log")
# checkpoint / tokenizer / model files: configs by extension, but not the run's configuration
NOT_RUN_FILES = {"tokenizer.json", "tokenizer_config.json", "vocab.json", "special_tokens_map.json", "added_tokens.json",
                 "generation_config.json", "preprocessor_config.json", "chat_template.json", "merges.txt",
                 "model.safetensors.index.json", "pytorch_model.bin.index.json", "requirements.txt", "LICENSE.txt"}
SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "venv", "site-packages", ".trash", ".cache"}


@dataclass
class Limits:
    """Bounds of one folder read. ``max_depth``: folders down; ``max_entries``: directory entries looked at;
    ``max_files``: text files read; ``max_file_bytes``: a config/script larger than this is skipped (a log larger
    than ``stream_bytes`` is streamed through the prefilter instead); ``max_total_bytes``: bytes of text read in all."""

    max_depth: int = 6
    max_entries: int = 20_000
    max_files: int = 200
    max_file_bytes: int = 4 << 20
    stream_bytes: int = 16 << 20
    max_total_bytes: int = 512 << 20


@dataclass
class TextInput:
    """A text file to read: ``role`` log | config | script; ``rel`` its path relative to the folder."""

    path: str
    rel: str
    role: str
    size: int


@dataclass
class Inventory:
    """What a folder holds: ``texts`` (read in this order: configs, scripts, logs), ``stores`` (StoreRef),
    ``skipped`` ('rel: why')."""

    root: str
    texts: list[TextInput] = field(default_factory=list)
    stores: list = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def rel(self, path: str) -> str:
        r = os.path.relpath(path, self.root)
        return os.path.basename(self.root) if r == "." else r


def _owned(stores) -> tuple[set[str], set[str]]:
    """(folders, files) a store reads itself: not read again as text."""
    dirs, files = set(), set()
    for ref in stores:
        p = os.path.abspath(ref.path)
        if os.path.isdir(p) and ref.kind != "tensorboard":
            dirs.add(p)
        elif os.path.isdir(p):
            from grpo_debug.tools import safefs
            from grpo_debug.tools.readers.tfevents import is_event_file

            files |= {os.path.join(p, n) for n in safefs.listdir(p, 20_000) if is_event_file(n)}
        else:
            files |= {p, p + "-wal", p + "-shm", p + "-journal"}
    return dirs, files


def role_of(name: str) -> str | None:
    """log | config | script for a file name, else None."""
    low = name.lower()
    if low in NOT_RUN_FILES:
        return None
    if low.endswith(CONFIG_EXT):
        return "config"
    if low.endswith(SCRIPT_EXT):
        return "script"
    if low.endswith(LOG_EXT) or low.split(".")[0] in LOG_NAMES or low.startswith(("slurm-", "nohup")):
        return "log"
    return None


def _looks_binary(path: str) -> bool:
    from grpo_debug.tools import safefs

    try:
        with safefs.open_file(path) as fh:
            head = fh.head(4096)
    except OSError:
        return True
    if head[:2] == b"\x1f\x8b" or head[:4] == b"\x28\xb5\x2f\xfd":
        return False  # gzip / zstd logs are streamed
    ctrl = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13, 27))
    return b"\x00" in head or ctrl > len(head) // 20


def _take(inv: Inventory, entry, lim: Limits, owned_files: set[str]) -> None:
    """Classify one regular file of the walk (a safefs.Entry) into ``inv`` (a text input, or a skipped note)."""
    path, name, size = entry.path, entry.name, entry.size
    ap = os.path.abspath(path)
    if ap in owned_files:
        return
    role = role_of(name)
    rel = inv.rel(path)
    if role is None:
        if name.lower() in NOT_RUN_FILES:
            inv.skipped.append(f"{rel}: checkpoint/tokenizer file, not the run's log or config")
        return
    if role != "log" and size > lim.max_file_bytes:
        inv.skipped.append(f"{rel}: {size >> 20} MiB {role} is larger than {lim.max_file_bytes >> 20} MiB")
        return
    if _looks_binary(path):
        inv.skipped.append(f"{rel}: binary")
        return
    inv.texts.append(TextInput(path, rel, role, size))


def find_inputs(folder: str, limits: Limits | None = None) -> Inventory:
    """Everything under ``folder`` worth reading (see the module docstring)."""
    from grpo_debug.tools import safefs
    from grpo_debug.tools.readers import find_stores

    lim = limits or Limits()
    folder = os.path.abspath(folder)
    inv = Inventory(root=folder)
    notes: list[str] = []
    owned_dirs: set[str] = set()
    owned_files: set[str] = set()
    seen = [0]

    def walk(d: str, depth: int) -> None:
        try:
            entries = safefs.scandir(d, lim.max_entries + 1 - seen[0])
        except OSError as e:
            why = getattr(e, "why", None) or e.strerror
            inv.skipped.append(f"{inv.rel(d)}: " + (f"not searched (more than {lim.max_entries} entries looked at)"
                                                    if "entries" in str(why) else f"cannot list ({why})"))
            return
        seen[0] += len(entries)
        for e in entries:
            if e.kind == "dir":
                if e.name in SKIP_DIRS or e.name == "mlruns" or os.path.abspath(e.path) in owned_dirs:
                    continue
                if depth < lim.max_depth:
                    walk(e.path, depth + 1)
            elif e.kind == "file":
                _take(inv, e, lim, owned_files)
            elif e.kind == "other" and role_of(e.name):
                inv.skipped.append(f"{inv.rel(e.path)}: not a regular file (a FIFO, socket or device); not read")
            # links: find_stores' notes already name them

    with safefs.anchored(folder):
        inv.stores = find_stores(folder, max_depth=lim.max_depth, max_files=lim.max_entries, notes=notes)
        inv.skipped += [n.replace(folder + os.sep, "") for n in notes]
        owned_dirs, owned_files = _owned(inv.stores)
        walk(folder, 0)
    order = {"config": 0, "script": 1, "log": 2}
    inv.texts.sort(key=lambda t: (order[t.role], t.rel))
    if len(inv.texts) > lim.max_files:
        inv.skipped += [f"{t.rel}: not read (more than {lim.max_files} text files)" for t in inv.texts[lim.max_files:][:20]]
        inv.texts = inv.texts[:lim.max_files]
    return inv
