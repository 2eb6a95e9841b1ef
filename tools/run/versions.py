"""Which release of each framework a run uses (issue 12, part 1), from three places:

1. **the input** (:func:`from_input`), one unit per kind of evidence, each below with examples and its source;
2. **the host** (:func:`from_host`): ``importlib.metadata`` of the installed distributions, no import of the
   packages themselves; only when the caller asks (``--versions host`` on the CLI, ``versions: "host"`` on MCP):
   the server may run on another machine than the job, so the host's packages are not the run's by default;
3. **an explicit argument** (:func:`parse_versions_arg`): ``verl=0.9.0,deepspeed=0.19.5`` (CLI ``--versions``,
   MCP ``versions``).

:func:`resolve` merges them (:func:`grpo_debug.tools.run.version_units.detect` does all three): the argument wins over the input, the input over the host (a version the run
printed is the run's; the host's is only a guess that the server runs beside it). Within the input an exact
version (a pip line, a banner) wins over a range (an image tag's ``verl0.5`` series, a flag spelling).

A detection is a :class:`VersionHit`: an exact ``version`` or a half-open range ``[lo, hi)`` (a flag that exists
only from OpenRLHF 0.10.2 says ``>= 0.10.2``). Framework names are canonical (:func:`canonical`): ``megatron``
for megatron-core / megatron-lm (Megatron's ``core_v0.18.0`` tag is ``0.18.0``), ``transformers`` for the HF
Trainer, ``torch`` for PyTorch.

Comparison uses ``packaging.version`` when installed (an optional dependency), else
``skills.schema.release_key`` (PEP 440 release, pre/dev/post; local ``+...`` parts dropped).
All regexes are linear: literal alternations, no nested quantifiers; a line is looked at only when a cheap
keyword test passes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from grpo_debug.skills.schema import release_key

try:  # optional: the same order as pip's
    from packaging.version import InvalidVersion, Version as _PV
except ImportError:  # pragma: no cover - exercised by test_versions via _fallback_key
    _PV = None
    InvalidVersion = ValueError  # type: ignore[misc,assignment]

# spelling (lower case, '_' as '-') -> canonical framework name
_CANON = {"megatron-lm": "megatron", "megatron-core": "megatron", "mcore": "megatron", "megatron": "megatron",
          "hf-trainer": "transformers", "transformers": "transformers", "pytorch": "torch", "torch": "torch",
          "torch.distributed": "torch", "sgl": "sglang", "skyrl-train": "skyrl", "nemo-rl": "nemo-rl"}
# canonical name -> distributions to read on the host (importlib.metadata normalises case and - / _)
HOST_PACKAGES: dict[str, tuple[str, ...]] = {
    "verl": ("verl",), "trl": ("trl",), "openrlhf": ("openrlhf",), "deepspeed": ("deepspeed",),
    "megatron": ("megatron-core",), "vllm": ("vllm",), "sglang": ("sglang",), "ray": ("ray",),
    "transformers": ("transformers",), "torch": ("torch",), "slime": ("slime",),
}
# package names a pip line / requirement may carry (anything else is ignored)
_PIP_NAMES = {"verl", "trl", "openrlhf", "deepspeed", "megatron-core", "megatron_core", "vllm", "sglang", "ray",
              "transformers", "torch", "slime", "relax", "skyrl-train", "nemo-rl", "vllm-ascend", "accelerate", "peft"}

_VER = r"v?(\d+(?:\.\d+)+(?:\.?(?:post|rc|dev|a|b)\d*)*(?:\+[\w.]+)?)"


def canonical(name: str) -> str:
    """Canonical framework name: ``megatron-lm`` / ``megatron_core`` -> ``megatron``, ``hf-trainer`` ->
    ``transformers``, ``PyTorch`` -> ``torch``; other names lower case with ``_`` as ``-``."""
    n = name.strip().lower().replace("_", "-")
    return _CANON.get(n, n)


def clean(v: str) -> str:
    """A printed version as a release number: ``v0.4.6.post1`` -> ``0.4.6.post1``, ``core_v0.18.0`` -> ``0.18.0``,
    ``2.21.5+cuda12.4`` / ``0.17.0.dev0+1884ff1`` -> the part before ``+``."""
    v = v.strip().strip("'\"").split("+", 1)[0]
    v = re.sub(r"^(?:core_[vr]|v)", "", v)
    return v.rstrip(".-")


def _fallback_key(v: str):
    return release_key(clean(v))


def version_key(v: str):
    """A sort key for a release number, or None when it is not one. ``packaging.version.Version`` when
    installed, else :func:`skills.schema.release_key` (the two agree on releases, pre-, dev- and
    post-releases; one process always uses the same)."""
    c = clean(v)
    if not c:
        return None
    if _PV is not None:
        try:
            return _PV(c)
        except InvalidVersion:
            return None
    try:
        return release_key(c)
    except ValueError:
        return None


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as release ``a`` is before, equal to or after ``b``. Raises ValueError for a non-release."""
    ka, kb = version_key(a), version_key(b)
    if ka is None or kb is None:
        raise ValueError(f"not a release number: {a if ka is None else b!r}")
    return (ka > kb) - (ka < kb)


@dataclass(frozen=True, slots=True)
class VersionHit:
    """One framework's release as one source shows it.

    ``framework``: canonical name. ``version``: the exact release, or '' when only a range is known;
    ``lo``/``hi``: the half-open range ``[lo, hi)`` (for an exact version ``lo == version`` and ``hi`` is '').
    ``source``: argument / input / host. ``unit``: which reader found it (pip, pip-show, pip-install, env-report,
    banner, deepspeed-info, vllm-engine, dunder, image-tag, comment, flag-spelling, argument, metadata).
    ``line``: 1-based input line or None. ``evidence``: the words a person reads (``pip: verl==0.4.1``)."""

    framework: str
    version: str = ""
    lo: str = ""
    hi: str = ""
    source: str = "input"
    unit: str = ""
    line: int | None = None
    evidence: str = ""

    @property
    def exact(self) -> bool:
        return bool(self.version)

    def span(self) -> str:
        """``openrlhf 0.9.8`` or ``openrlhf >= 0.10.2`` (no evidence)."""
        if self.version:
            return f"{self.framework} {self.version}"
        return " ".join(x for x in (self.framework, f">= {self.lo}" if self.lo else "",
                                    f"< {self.hi}" if self.hi else "") if x)

    def describe(self) -> str:
        """``verl 0.9.0 (argument)``, ``openrlhf >= 0.10.2 (line 3: --actor.max_norm)``."""
        what = self.span()
        where = self.source if self.line is None else f"line {self.line}"
        return f"{what} ({where}: {self.evidence})" if self.evidence else f"{what} ({where})"


def exact(fw: str, v: str, unit: str, line: int | None, evidence: str, source: str = "input") -> VersionHit | None:
    """A hit for an exact release, or None when ``v`` is not a release number."""
    c = clean(v)
    if version_key(c) is None:
        return None
    return VersionHit(canonical(fw), c, c, "", source, unit, line, evidence[:120])


def series(fw: str, v: str, unit: str, line: int | None, evidence: str) -> VersionHit | None:
    """``0.5`` (an image tag's release series) as the range [0.5, 0.6); a three-part version is exact."""
    c = clean(v)
    parts = c.split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return exact(fw, c, unit, line, evidence)
    hi = f"{parts[0]}.{int(parts[1]) + 1}"
    return VersionHit(canonical(fw), "", c, hi, "input", unit, line, evidence[:120])


# ------------------------------------------------------------------------------------------- explicit and host

def parse_versions_arg(text: str | None) -> tuple[dict[str, VersionHit], bool]:
    """``"verl=0.9.0,deepspeed=0.19.5"`` (also ``==``, spaces, ``;``) -> ({framework: hit}, host asked).
    The word ``host`` asks for the host's versions too. Raises ValueError naming the bad item."""
    out: dict[str, VersionHit] = {}
    host = False
    for item in re.split(r"[,;\s]+", (text or "").strip()):
        if not item:
            continue
        if item.lower() == "host":
            host = True
            continue
        name, sep, ver = item.partition("=")
        ver = ver.lstrip("=")
        if not sep or not name.strip() or not ver:
            raise ValueError(f"versions: {item!r} is not NAME=VERSION (e.g. verl=0.9.0,deepspeed=0.19.5, or host)")
        hit = exact(name, ver, "argument", None, f"{name.strip()}={ver}", source="argument")
        if hit is None:
            raise ValueError(f"versions: {ver!r} is not a release number (e.g. 0.9.0, 0.12.0rc3)")
        out[hit.framework] = hit
    return out, host


def checked_arg(text: str, error=ValueError) -> str:
    """``text`` unchanged when :func:`parse_versions_arg` accepts it, else ``error(message)`` (the CLI passes
    argparse.ArgumentTypeError so argparse names the bad item)."""
    try:
        parse_versions_arg(text)
    except ValueError as e:
        raise error(str(e).removeprefix("versions: ")) from None
    return text


def from_host(names: Iterable[str] | None = None) -> dict[str, VersionHit]:
    """Installed releases on this machine through ``importlib.metadata`` (reads dist-info, imports nothing).
    ``names``: canonical frameworks to look up (default: :data:`HOST_PACKAGES`)."""
    from importlib import metadata

    out: dict[str, VersionHit] = {}
    for fw in names or HOST_PACKAGES:
        for dist in HOST_PACKAGES.get(fw, (fw,)):
            try:
                v = metadata.version(dist)
            except (metadata.PackageNotFoundError, ValueError):
                continue
            hit = exact(fw, v, "metadata", None, f"installed {dist} {v}", source="host")
            if hit:
                out[hit.framework] = hit
            break
    return out


# ------------------------------------------------------------------------------------------- resolution

_RANK = {"argument": 9, "pip": 5, "pip-show": 5, "pip-install": 5, "env-report": 5, "banner": 5, "deepspeed-info": 5,
         "vllm-engine": 5, "dunder": 5, "facts": 4, "comment": 4, "image-tag": 3, "flag-spelling": 1}


def best_of(hits: Iterable[VersionHit]) -> dict[str, VersionHit]:
    """One hit per framework: exact before ranges, then the unit's rank, then the earliest line. Two ranges of
    one framework (a tag's series and a flag spelling) are intersected when they overlap."""
    out: dict[str, VersionHit] = {}
    for h in hits:
        cur = out.get(h.framework)
        if cur is None:
            out[h.framework] = h
            continue
        if cur.exact or h.exact:
            if h.exact and (not cur.exact or _RANK.get(h.unit, 0) > _RANK.get(cur.unit, 0)):
                out[h.framework] = h
            continue
        out[h.framework] = _intersect(cur, h)
    return out


def _intersect(a: VersionHit, b: VersionHit) -> VersionHit:
    lo = max((x for x in (a.lo, b.lo) if x), key=version_key, default="")
    hi = min((x for x in (a.hi, b.hi) if x), key=version_key, default="")
    if lo and hi and compare(lo, hi) >= 0:  # the two disagree: keep the stronger one
        return a if _RANK.get(a.unit, 0) >= _RANK.get(b.unit, 0) else b
    ev = a.evidence if b.evidence in a.evidence else f"{a.evidence}; {b.evidence}"
    if len(ev) > 100:  # many flags of one release: the first ones
        ev = ev[:100].rsplit(";", 1)[0] + "; ..."
    return VersionHit(a.framework, "", lo, hi, a.source, a.unit, a.line, ev)


def resolve(explicit: dict[str, VersionHit] | None = None, found: Iterable[VersionHit] = (),
            host: dict[str, VersionHit] | None = None) -> dict[str, VersionHit]:
    """{framework: hit}: the argument's over the input's over the host's."""
    out = dict(host or {})
    out.update(best_of(found))
    out.update(explicit or {})
    return out
