"""The readers of :mod:`grpo_debug.tools.run.versions`, one per kind of evidence in an input. Each returns
:class:`~grpo_debug.tools.run.versions.VersionHit` objects with the line that shows the version.

- **pip**: ``verl==0.4.1`` (pip freeze, requirements, ``pip install x==v``), ``deepspeed   0.14.0`` (a pip list
  row). Source: pip's documentation (``pip freeze`` prints ``name==version``, ``pip list`` a Package/Version table).
- **pip-show**: ``Name: verl`` then ``Version: 0.4.1`` (``pip show``).
- **pip-install**: ``Successfully installed deepspeed-0.14.0 verl-0.4.1`` (pip's install summary).
- **env-report**: ``- TRL version: 0.19.1`` / ``- DeepSpeed version: 0.15.4`` (``trl env``), ``- `transformers`
  version: 4.57.1`` / ``- PyTorch version (GPU?): 2.1.0+cu121 (True)`` (``transformers env``),
  ``vLLM API server version 0.8.5.post1`` (vLLM ``entrypoints/openai/api_server.py``:
  ``logger.info("vLLM API server version %s", VLLM_VERSION)``), ``NCCL INFO NCCL version 2.21.5+cuda12.4``
  (NCCL_DEBUG=INFO, ``src/init.cc`` VERSION_STRING), ``ray, version 2.9.3`` (``ray --version``).
- **deepspeed-info**: ``DeepSpeed info: version=0.14.0, git-hash=unknown, git-branch=unknown`` (DeepSpeed
  ``deepspeed/__init__.py`` ``initialize()``: ``log_dist("DeepSpeed info: version={}, git-hash={}, ...")``).
- **vllm-engine**: ``Initializing a V1 LLM engine (v0.10.1.1) with config: ...`` (vLLM ``v1/engine/core.py``),
  ``Initializing a V0 LLM engine (v0.8.5)`` and, in older releases, ``Initializing an LLM engine (v0.6.3)``
  (``engine/llm_engine.py``).
- **dunder**: ``vllm.__version__ = 0.8.5``; ``>>> verl.__version__`` then ``'0.4.1'`` (a REPL echo).
- **image-tag**: ``verlai/verl:app-verl0.5-transformers4.55.4-vllm0.10.0-mcore0.13.0-te2.2`` (verl's
  ``docker/README.md``: "image with tag verl0.4 is built for verl release v0.4.x", so ``verl0.5`` is the range
  [0.5, 0.6); the engines' versions are exact), ``lmsysorg/sglang:v0.4.6.post1-cu124``, ``vllm/vllm-openai:v0.8.5``
  (Docker Hub tags ``v<version>``).
- **facts / comment**: ``# verl 0.4.1`` comments and pip-list rows already read by ``tools/engine/facts.py``
  (``versions.<pkg>`` facts).
- **flag-spelling**: ``--actor.max_norm 1.0`` in an OpenRLHF command means openrlhf >= 0.10.2: the rule base's
  ``identifiers`` ranges (``since``/``until``), audited against the releases by ``scripts/audit_knowledge.py``.
"""
from __future__ import annotations

import re
from typing import Iterable

from grpo_debug.tools.run import versions as _versions
from grpo_debug.tools.run.versions import (_PIP_NAMES, _VER, VersionHit, canonical, exact, parse_versions_arg, resolve,
                                          series, version_key)

# a cheap test before any unit regex runs on a line
_KEYWORDS = ("version", "==", "successfully installed", "name:", "llm engine", "verl", "vllm", "sglang", "deepspeed",
             "trl", "openrlhf", "torch", "transformers", "ray", "megatron", "slime", "relax", "accelerate", "peft",
             "nemo", "skyrl")
_ENV_NAMES = (r"trl|verl|openrlhf|deepspeed|vllm|sglang|ray|transformers|pytorch|torch|nccl|megatron[-_ ]core|"
              r"megatron|slime")
_FREEZE = re.compile(r"(?<![\w.-])([A-Za-z][\w.-]*)(?:\[[\w,.-]*\])?\s*===?\s*" + _VER)
_PIP_LIST = re.compile(r"^\s*([A-Za-z][\w.-]*)\s+" + _VER + r"(?:\s+\S+)?\s*$")
_PIP_NAME = re.compile(r"^\s*Name:\s*([A-Za-z][\w.-]*)\s*$")
_PIP_VERSION = re.compile(r"^\s*Version:\s*" + _VER + r"\s*$")
_INSTALLED = re.compile(r"Successfully installed\s+(.*)$")
_ENV = re.compile(r"(?<![\w.-])`?(" + _ENV_NAMES + r")`?,?(?:\s+API\s+server)?\s+version(?:\s\([^)]{0,16}\))?"
                  r"\s*[:=]?\s*" + _VER, re.I)
_DS_INFO = re.compile(r"DeepSpeed info: version=" + _VER)
_VLLM_ENGINE = re.compile(r"Initializing an? (?:V[01] )?LLM engine \(" + _VER + r"\)")
_DUNDER = re.compile(r"\b([A-Za-z][\w]*)\.__version__\b(?:\W{0,8}?" + _VER + r")?")
_BARE_VERSION = re.compile(r"^\s*(?:Out\[\d+\]:\s*)?['\"]?" + _VER + r"['\"]?\s*$")
_IMAGE = re.compile(r"/(verl|sglang|vllm-openai):(\w[\w.+-]{0,127})")  # verlai/verl:TAG, lmsysorg/sglang:TAG
_TAG_TOKEN = re.compile(r"(?:^|[-_.])(verl|vllm|sglang|sgl|mcore|transformers|torch|deepspeed|trl)"
                        r"(\d+(?:\.\d+)+(?:\.?post\d+)?)(?=$|[-_])")
_SINGLE_IMAGE = {"sglang": "sglang", "vllm-openai": "vllm"}


def _pip(no: int, t: str) -> list[VersionHit]:
    out = []
    for name, ver in _FREEZE.findall(t):
        if name.lower() in _PIP_NAMES:
            h = exact(name, ver, "pip", no, f"{name}=={ver}")
            out += [h] if h else []
    m = _PIP_LIST.match(t)
    if m and m.group(1).lower() in _PIP_NAMES:
        h = exact(m.group(1), m.group(2), "pip", no, f"pip list: {m.group(1)} {m.group(2)}")
        out += [h] if h else []
    m = _INSTALLED.search(t)
    if m:
        for name, _, ver in (tok.rpartition("-") for tok in m.group(1).split()[:400]):
            if name.lower() in _PIP_NAMES and ver[:1].isdigit():
                h = exact(name, ver, "pip-install", no, f"installed {name}-{ver}")
                out += [h] if h else []
    return out


def _banners(no: int, t: str) -> list[VersionHit]:
    out = []
    for unit, rx, fw in (("deepspeed-info", _DS_INFO, "deepspeed"), ("vllm-engine", _VLLM_ENGINE, "vllm")):
        m = rx.search(t)
        if m:
            h = exact(fw, m.group(1), unit, no, m.group(0))
            out += [h] if h else []
    for m in _ENV.finditer(t):
        h = exact(m.group(1).replace(" ", "-"), m.group(2), "env-report", no, m.group(0).strip("`- "))
        out += [h] if h else []
    return out


def _image_tags(no: int, t: str) -> list[VersionHit]:
    out = []
    for m in _IMAGE.finditer(t):
        repo, tag = m.group(1), m.group(2)
        single = _SINGLE_IMAGE.get(repo)
        lead = re.match(_VER, tag)
        if single and lead:
            h = exact(single, lead.group(1), "image-tag", no, m.group(0).lstrip("/"))
            out += [h] if h else []
            continue
        for name, ver in _TAG_TOKEN.findall(tag):
            h = series(name, ver, "image-tag", no, m.group(0).lstrip("/"))
            out += [h] if h else []
    return out


def _dunder(no: int, t: str, pending: list) -> list[VersionHit]:
    """``pkg.__version__`` with the version on the same line, or on the next non-empty line (a REPL echo)."""
    if pending:
        name, at = pending.pop()
        m = _BARE_VERSION.match(t)
        if m and no - at <= 2:
            h = exact(name, m.group(1), "dunder", no, f"{name}.__version__ -> {m.group(1)}")
            return [h] if h else []
    out = []
    for m in _DUNDER.finditer(t):
        name = m.group(1)
        if canonical(name) not in {canonical(x) for x in _PIP_NAMES} and name.lower() not in ("megatron", "nccl"):
            continue
        if m.group(2):
            h = exact(name, m.group(2), "dunder", no, m.group(0))
            out += [h] if h else []
        else:
            pending.append((name, no))
    return out


def scan_lines(lines, skip=frozenset()) -> list[VersionHit]:
    """Every unit over every line (a line without a version-looking keyword costs a few substring tests);
    ``skip``: line numbers known to be something else (the metric lines of a long log)."""
    hits: list[VersionHit] = []
    last_name: tuple[str, int] | None = None
    pending: list = []
    for ln in lines:
        if ln.no in skip:
            continue
        t = ln.text
        if pending and len(t) < 64:  # a REPL echo of pkg.__version__ on the line after it
            echo = _dunder(ln.no, t, pending)
            if echo:
                hits += echo
                continue
        low = t.lower()
        if len(t) > 4000 or not any(k in low for k in _KEYWORDS):
            continue
        m = _PIP_NAME.match(t)
        if m:
            last_name = (m.group(1), ln.no)
            continue
        m = _PIP_VERSION.match(t)
        if m and last_name and ln.no - last_name[1] <= 3 and last_name[0].lower() in _PIP_NAMES:
            h = exact(last_name[0], m.group(1), "pip-show", ln.no, f"pip show {last_name[0]}: {m.group(1)}")
            hits += [h] if h else []
            continue
        hits += _pip(ln.no, t) + _banners(ln.no, t) + _image_tags(ln.no, t) + _dunder(ln.no, t, pending)
    return hits


def from_facts(facts) -> list[VersionHit]:
    """``versions.<pkg>`` facts that ``tools/engine/facts.py`` read (pip list rows, ``# verl 0.4.1`` comments)."""
    out = []
    for f in facts.facts:
        if f.key.lower().startswith("versions."):
            pkg = f.key[9:]
            if pkg.lower() in _PIP_NAMES or canonical(pkg) in ("megatron",):
                unit = "comment" if f.origin == "comment" else "facts"
                h = exact(pkg, str(f.value), unit, f.line, f"{pkg} {f.value}")
                out += [h] if h else []
    return out


def _norm_flag(name: str) -> str:
    return name.lstrip("-").replace("-", "_").lower()


def flag_spellings(facts, rules, frameworks: set[str]) -> list[VersionHit]:
    """A launch flag that exists only in some releases bounds the framework's version: a rule identifier
    ``{name: --actor.max_norm, framework: openrlhf, since: 0.10.2}`` seen as a flag means openrlhf >= 0.10.2;
    ``{name: --max_norm, until: 0.10.2}`` means < 0.10.2. Counted only for a framework the input shows
    (``frameworks``), and only flags (``kind: flag``) read from a command line."""
    spans: dict[tuple[str, str], tuple[str, str]] = {}
    for r in rules:
        for i in r.identifiers:
            if i.kind == "flag" and (i.since or i.until) and canonical(i.framework) in frameworks:
                spans.setdefault((_norm_flag(i.name), canonical(i.framework)), (i.since, i.until))
    if not spans:
        return []
    out: list[VersionHit] = []
    for f in facts.facts:
        if f.origin != "flag":
            continue
        key = _norm_flag(f.key)
        for (name, fw), (lo, hi) in spans.items():
            if name == key and all(not v or version_key(v) is not None for v in (lo, hi)):
                out.append(VersionHit(fw, "", lo, hi, "input", "flag-spelling", f.line, f"flag --{f.key}"))
    since = {h.framework for h in out if h.lo}  # a dotted flag beside an old one (train_sft keeps --max_norm)
    return [h for h in out if h.lo or h.framework not in since]


def from_input(lines, facts=None, rules=None, frameworks: Iterable[str] = (), skip=frozenset()) -> list[VersionHit]:
    """Every version the input shows (the units above).

    Args:
        lines: normalised ``Line`` objects (``.no``, ``.text``).
        facts: the engine ``FactSet`` (``versions.<pkg>`` facts of pip lines and comments; launch flags for
            the flag-spelling unit) or None.
        rules: the rule base whose ``identifiers`` give flag ranges, or None (no flag-spelling unit).
        frameworks: frameworks detected in the input (a flag spelling counts only for one of them).
        skip: line numbers not to read (metric lines).
    """
    hits = scan_lines(lines, skip)
    if facts is not None:
        hits += from_facts(facts)
        if rules is not None:
            hits += flag_spellings(facts, rules, {canonical(f) for f in frameworks})
    return hits


def detect(lines, facts=None, rules=None, frameworks: Iterable[str] = (), explicit: str | dict | None = None,
           host: bool = False, skip=frozenset()) -> dict[str, VersionHit]:
    """The resolved versions of one input: ``explicit`` (the argument's text or a parsed dict), the input's own
    lines and facts, and the host's metadata when ``host`` (or the word ``host`` in ``explicit``)."""
    if isinstance(explicit, str) or explicit is None:
        explicit, asked = parse_versions_arg(explicit)
        host = host or asked
    return resolve(explicit, from_input(lines, facts, rules, frameworks, skip), _versions.from_host() if host else None)
