"""Reading an input and telling what it is: the one place that decodes a file or pasted text and sniffs
its format (a YAML/JSON document, a launch script, a log, Python code, a compressed file)."""
from __future__ import annotations

import os
import re
from pathlib import Path

from grpo_debug.tools.errors import InputError

MAX_INPUT_BYTES = 256 * 2**20
STREAM_THRESHOLD = 16 * 2**20  # bytes: larger files (and every .gz/.zst) are streamed through the prefilter


def is_compressed(p: Path) -> bool:
    """True for a gzip or zstd file (by its magic bytes)."""
    from grpo_debug.tools import safefs

    magic = safefs.head(p, 4)
    return magic[:2] == b"\x1f\x8b" or magic == b"\x28\xb5\x2f\xfd"


def _first(fh, n: int) -> bytes:
    """The first ``n`` bytes of a safefs.SafeFile, read in 1 MiB pieces."""
    chunks, got = [], 0
    while got < n:
        b = fh.read(min(1 << 20, n - got))
        if not b:
            break
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def read_input(text: str | None, path: str | os.PathLike | None) -> tuple[str, str, list[str], str | None]:
    """Return (decoded text, input label, skipped notes, format hint from the file name).

    Raises InputError when neither or both of text/path are given, or the path cannot be read.
    Binary data and invalid UTF-8 are not errors: the text is decoded with replacement and the
    notes say what was skipped.
    """
    if (text is None) == (path is None):
        raise InputError("give exactly one of text (the pasted log) or path (a file to read)")
    skipped: list[str] = []
    hint = None
    if path is not None:
        from grpo_debug.tools import safefs

        p = Path(path).expanduser()
        if not p.exists():
            raise InputError(f"{p}: no such file; give the path of an existing log, config or launch script")
        if p.is_dir():
            raise InputError(f"{p} is a directory; pass one log or config file inside it")
        if not p.is_file():
            raise InputError(f"{p} is not a regular file (device or pipe); save the log to a file first")
        try:
            with safefs.open_file(p) as fh:
                size = fh.size
                data = fh.read_all(MAX_INPUT_BYTES) if size <= MAX_INPUT_BYTES else _first(fh, MAX_INPUT_BYTES)
        except safefs.Refused as e:
            raise InputError(f"{p}: {e.why}; give a regular file (save the log to a file first)") from e
        except OSError as e:
            raise InputError(f"{p}: cannot read: {e.strerror or e}") from e
        if size > MAX_INPUT_BYTES:
            skipped.append(f"only the first {MAX_INPUT_BYTES // 2**20} MiB of {size / 2**20:.0f} MiB were read")
        label = str(p)
        ext = p.suffix.lower()
        hint = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".sh": "sh", ".bash": "sh"}.get(ext)
    else:
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
        if len(data) > MAX_INPUT_BYTES:
            skipped.append(f"only the first {MAX_INPUT_BYTES // 2**20} MiB of the pasted text were read")
            data = data[:MAX_INPUT_BYTES]
        label = "<text>"
    head = data[:65536]
    ctrl = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13, 27))
    binary = refuse_binary(head, ctrl, label)
    if binary:
        raise InputError(binary)
    if head and ctrl > len(head) // 20:
        skipped.append(f"input looks binary ({ctrl} control bytes in the first {len(head)} bytes); "
                       "it is not a text log, so findings are unlikely")
    if b"\x00" in data:
        data = data.replace(b"\x00", b"")
    s = data.decode("utf-8", errors="replace")
    bad = s.count("\ufffd")
    if bad:
        skipped.append(f"{bad} bytes were not valid UTF-8 and were replaced")
    return s, label, skipped, hint


#: Magic numbers of executables, object files and libraries: never a log (a .so once gave an NCCL finding).
_BINARY_MAGIC = {b"\x7fELF": "an ELF executable or shared library", b"MZ": "a Windows executable",
                 b"\xcf\xfa\xed\xfe": "a Mach-O binary", b"\xca\xfe\xba\xbe": "a Mach-O/Java class binary",
                 b"!<arch>\n": "a static library (ar archive)", b"\x89PNG": "a PNG image", b"%PDF": "a PDF"}


def refuse_binary(head: bytes, ctrl: int, label: str) -> str | None:
    """Why the input is refused as binary (an executable, a library, an image, or mostly NUL and control
    bytes), else None. Compressed logs and metric stores are read before this, by their own readers."""
    what = next((w for m, w in _BINARY_MAGIC.items() if head.startswith(m)), None)
    if what is None and head and head.count(0) > len(head) // 100 and ctrl > len(head) // 10:
        what = f"binary data ({ctrl} control bytes in the first {len(head)})"
    if what is None and head and ctrl > len(head) // 20:
        # control bytes and mostly not UTF-8: random, encrypted or an unknown compressed format (a text log in a
        # legacy encoding has few control bytes; one with ANSI colours or tqdm's \r has them excluded from ctrl)
        bad = head.decode("utf-8", "replace").count("\ufffd")
        if bad > len(head) // 10:
            what = f"binary data ({ctrl} control bytes and {bad} bytes that are not UTF-8 in the first {len(head)})"
    if what is None:
        return None
    return (f"{label} is {what}, not a text log, config or launch script; give the training log (stdout/stderr "
            "saved to a file), the config, or the launch command")


def looks_like_document(s: str, hint: str | None) -> bool:
    """True when the whole input is one YAML/JSON document (by the file's extension, or a JSON object)."""
    if hint in ("yaml", "json"):
        return True
    st = s.lstrip()
    return st.startswith("{") and st.rstrip().endswith("}")


def sniff_format(s: str, hint: str | None) -> str:
    """yaml | json | sh | log: the extension's word, else what the text looks like."""
    if hint in ("yaml", "json", "sh"):
        return hint
    st = s.lstrip()
    lines = [ln for ln in s.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if st.startswith("{"):
        one_per_line = sum(ln.lstrip().startswith("{") and ln.rstrip().endswith("}") for ln in lines[:200])
        # one object per line (JSON-lines records, HF Trainer dict prints) is a log, not one JSON document
        return "log" if len(lines) > 1 and one_per_line >= 0.8 * min(len(lines), 200) else "json"
    if lines and sum(bool(re.match(r"^\s*(-\s|[\w.-]+:(\s|$))", ln)) for ln in lines) >= 0.8 * len(lines):
        return "yaml"
    if re.search(r"^[ \t]*(python3?|torchrun|deepspeed|ray job submit|accelerate launch|bash|export)\b|\\[ \t]*$", s, re.M):
        return "sh"
    return "log"


def looks_like_log_or_config(text: str) -> bool:
    """True when free text is a pasted log, config or command rather than a few words."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return len(lines) >= 3 or bool(re.search(r"step[: ]\d|Traceback|Error:|^[ \t]*[\w.]+=|--\w|^[ \t]*\{|^[ \t]*\w+:\s", text, re.M))


def is_python(text: str) -> bool:
    """True when the text reads as Python source (imports, defs, torch assignments)."""
    return bool(re.search(r"^[ \t]*(import |from \S+ import |def |class |with |[\w.]+[ \t]*=[ \t]*torch\.)", text, re.M))
