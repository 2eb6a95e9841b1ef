"""Which frameworks a run shows, with version and evidence lines (:class:`FrameworkHit`).

Evidence, each weighted (a version print is decisive, one stray word is not):

- ``versions.<pkg>`` facts (``pip list``/``pip show`` lines, ``# verl 0.4.1`` comments): weight 3, version;
- module paths and entry points in lines (``verl.trainer.main_ppo``, ``site-packages/trl/``,
  ``from openrlhf``, ``python -m areal``, ``deepspeed --module openrlhf.cli.train_ppo_ray``, tracebacks'
  ``File ".../slime/..."``): weight 2 per distinct line (at most 3 lines counted);
- the sourced markers of ``skills/aliases.yaml`` ``framework_markers`` (:func:`markers`): a config key, key prefix
  (``actor_rollout_ref.``) or ``--flag`` weight 1 each, at most 3; a text marker (a class name such as
  ``GRPOTrainer``, a module path, a log phrase) found in the first :data:`TEXT_MARKER_LINES` lines: weight 1;
- config keys of frameworks the alias table does not cover yet (:data:`_KEY_MARKERS`): weight 2 each;
- the console metric format the metrics reader recognised (``verl`` step lines, slime dicts, Megatron
  iteration lines, HF Trainer dicts, DeepSpeed overflow lines): weight 2.

The regexes are plain alternations of literal names between word boundaries (linear time).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice

from grpo_debug.tools.run.model import FrameworkHit

# name -> the spelling of its Python package / entry point in paths and commands
_PACKAGES: dict[str, str] = {
    "verl": r"verl", "slime": r"slime", "openrlhf": r"openrlhf", "trl": r"trl", "skyrl": r"skyrl(?:_train|_gym)?",
    "areal": r"areal|realhf", "nemo_rl": r"nemo_rl", "roll": r"roll", "prime_rl": r"prime_rl", "megatron": r"megatron",
    "deepspeed": r"deepspeed", "vllm": r"vllm", "sglang": r"sglang", "ray": r"ray", "relax": r"relax",
}
_PIP_NAMES = {"verl": "verl", "slime": "slime", "openrlhf": "openrlhf", "trl": "trl", "skyrl-train": "skyrl",
              "skyrl_train": "skyrl", "areal": "areal", "nemo-rl": "nemo_rl", "nemo_rl": "nemo_rl", "roll": "roll",
              "prime-rl": "prime_rl", "prime_rl": "prime_rl", "megatron-core": "megatron", "megatron_core": "megatron",
              "deepspeed": "deepspeed", "vllm": "vllm", "sglang": "sglang", "ray": "ray", "relax": "relax"}
# a package mentioned as code: a path segment, an import, a -m entry point
_CODE_MENTION = re.compile(r"(?:[/\\](?:site-packages[/\\])?|\bimport |\bfrom |-m |--module )("
                           + "|".join(_PACKAGES.values()) + r")(?=[./\\\s]|$)")
_NAME_OF = [(re.compile(f"^(?:{v})$"), k) for k, v in _PACKAGES.items()]
_FORMAT_NAMES = {"verl": "verl", "slime": "slime", "openrlhf": "openrlhf", "openrlhf_tqdm": "openrlhf",
                 "megatron": "megatron", "hf_trainer": "trl", "deepspeed": "deepspeed", "verl_jsonl": "verl",
                 "skyrl": "skyrl", "areal": "areal", "nemo_rl": "nemo_rl", "roll": "roll", "prime_rl": "prime_rl",
                 "trainer_state": "trl"}
MAX_EVIDENCE_LINES = 3


def _hit(hits: dict[str, FrameworkHit], name: str) -> FrameworkHit:
    h = hits.get(name)
    if h is None:
        h = hits[name] = FrameworkHit(name=name)
    return h


def _code_mentions(lines, hits: dict[str, FrameworkHit]) -> None:
    seen: dict[str, int] = {}
    for ln in lines:
        t = ln.text
        if len(t) < 6 or (".py" not in t and "import " not in t and "-m " not in t and "--module " not in t):
            continue  # a module path is in a traceback frame (.py), an import or an entry point
        for m in _CODE_MENTION.finditer(t):
            name = next((k for rx, k in _NAME_OF if rx.match(m.group(1))), None)
            if name is None or seen.get(name, 0) >= MAX_EVIDENCE_LINES:
                continue
            h = _hit(hits, name)
            if ln.no in h.lines:
                continue
            seen[name] = seen.get(name, 0) + 1
            h.lines.append(ln.no)
            launched = m.group(0).startswith(("-m ", "--module "))
            h.evidence.append(f"line {ln.no} {'launches' if launched else 'names'} the {m.group(1)} package")
            h.score += 4 if launched else 2


# config keys only one framework writes (first dotted parts / top-level names of its YAML or overrides), beside the
# alias table's markers: NeMo-RL examples/configs/grpo_math_1B.yaml (grpo:, policy:, loss_fn:),
# ROLL examples/*/rlvr_config.yaml (actor_train:, actor_infer:, num_return_sequences_in_group), SkyRL
# trainer.placement.* / generator.* overrides, AReaL examples/math/gsm8k_grpo.yaml (gconfig:, actor:, stats_logger:)
_KEY_MARKERS: dict[str, re.Pattern[str]] = {
    "nemo_rl": re.compile(r"^(?:grpo\.num_prompts_per_step|grpo\.num_generations_per_prompt|policy\.dtensor_cfg|"
                          r"policy\.megatron_cfg|loss_fn\.reference_policy_kl_penalty)"),
    "roll": re.compile(r"^(?:actor_train|actor_infer)\.|^num_return_sequences_in_group$"),
    "skyrl": re.compile(r"^(?:trainer\.placement\.|generator\.(?:inference_engine_tensor_parallel_size|n_samples_per_prompt))"),
    "areal": re.compile(r"^(?:gconfig\.|stats_logger\.|actor\.path$|recover\.mode$)"),
}
# the alias table's framework names -> this module's (the HF Trainer is TRL's base)
_ALIAS_NAMES = {"hf_trainer": "trl"}
_KEY_LIKE = re.compile(r"^[a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*\.?$")
TEXT_MARKER_LINES = 5000  # launch lines, config prints and tracebacks' imports come first; a log's tail is metrics


@dataclass(frozen=True)
class Markers:
    """The alias table's markers compiled: ``keys`` (framework, exact key or prefix, is_prefix); ``text``
    (framework, literal) for the text markers."""

    keys: tuple[tuple[str, str, bool], ...]
    text: tuple[tuple[str, str], ...]


@lru_cache(maxsize=1)
def markers() -> Markers:
    """``skills/aliases.yaml`` ``framework_markers`` (verified ones only) compiled once. A pattern is a config key
    when it is a lower-case key (``zero_optimization``: the key or a section under it; ``actor_rollout_ref.``: a
    prefix) or a ``--flag`` (its fact key: dashes as underscores, ``--vllm.num_engines`` as written); it is a text
    marker (searched as a literal) when it has a space, an upper-case letter or ``.py``, or is a dotted module path
    of its own package (``verl.trainer.main_ppo``)."""
    from grpo_debug.skills.aliases import load_aliases

    keys: list[tuple[str, str, bool]] = []
    text: list[tuple[str, str]] = []
    for fw, ms in load_aliases().framework_markers.items():
        name = _ALIAS_NAMES.get(fw, fw)
        for m in ms:
            if m.status != "verified":
                continue
            pat = m.pattern
            if pat.startswith("--"):
                key = pat[2:] if "." in pat else pat[2:].replace("-", "_")
                keys.append((name, key, False))
                continue
            module = "." in pat.rstrip(".") and pat.split(".", 1)[0] in (_PACKAGES.get(name, name), name)
            if _KEY_LIKE.match(pat) and not module and not pat.endswith(".py"):
                keys.append((name, pat.rstrip("."), pat.endswith(".")))
            else:
                text.append((name, pat))
    return Markers(tuple(keys), tuple(text))


def _key_marker(key: str, marker: str, prefix: bool) -> bool:
    k = key.lower()
    return k.startswith(marker + ".") if prefix else (k == marker or k.startswith(marker + "."))


def _config_markers(facts, hits: dict[str, FrameworkHit]) -> None:
    """Config keys of one framework: 1 point each for the alias table's markers (some prefixes, such as verl's
    ``data.``, other frameworks write too), 2 for _KEY_MARKERS, at most 3 keys per framework."""
    table = markers()
    counted: dict[str, int] = {}

    def count(name: str, f, weight: int) -> None:
        counted[name] = counted.get(name, 0) + 1
        h = _hit(hits, name)
        h.lines.append(f.line)
        h.evidence.append(f"config key {f.key} (line {f.line})")
        h.score += weight

    for f in facts.facts:
        for name, marker, prefix in table.keys:
            if counted.get(name, 0) < 3 and _key_marker(f.key, marker, prefix):
                count(name, f, 1)
        for name, rx in _KEY_MARKERS.items():
            if counted.get(name, 0) < 3 and rx.search(f.key):
                count(name, f, 2)


def _text_markers(lines, hits: dict[str, FrameworkHit]) -> None:
    """The alias table's text markers in the first TEXT_MARKER_LINES lines: 1 point per framework, its first line.
    One ``str.find`` per literal over the joined head (a regex alternation per line costs ten times more)."""
    table = markers().text
    head = list(islice(lines, TEXT_MARKER_LINES)) if table else []
    if not head:
        return
    text = "\n".join(ln.text for ln in head)
    found: set[str] = set()
    for name, lit in table:
        pos = -1 if name in found else text.find(lit)
        if pos < 0:
            continue
        found.add(name)
        ln = head[text.count("\n", 0, pos)]
        h = _hit(hits, name)
        h.lines.append(ln.no)
        h.evidence.append(f"line {ln.no} prints {lit!r}")
        h.score += 1


def detect(lines, facts=None, formats=()) -> list[FrameworkHit]:
    """Frameworks of a run, most evident first.

    Args:
        lines: normalised ``Line`` objects (``.no``, ``.text``), may be empty (a store run).
        facts: an engine ``FactSet`` (``.facts`` with ``key``, ``value``, ``line``) or None.
        formats: metric formats the console reader recognised (``MetricTable.formats``).
    """
    hits: dict[str, FrameworkHit] = {}
    for f in (facts.facts if facts is not None else []):
        if f.key.lower().startswith("versions."):
            name = _PIP_NAMES.get(f.key.lower()[9:])
            if name:
                h = _hit(hits, name)
                h.version = h.version or str(f.value)
                h.lines.append(f.line)
                h.evidence.append(f"{f.key[9:]} {f.value} at line {f.line}")
                h.score += 3
    _code_mentions(lines, hits)
    _text_markers(lines, hits)
    if facts is not None:
        _config_markers(facts, hits)
    for fmt in sorted(formats):
        name = _FORMAT_NAMES.get(fmt)
        if name:
            h = _hit(hits, name)
            h.evidence.append(f"{fmt} metric lines")
            h.score += 2
    out = sorted(hits.values(), key=lambda h: -h.score)
    for h in out:
        h.lines = sorted(set(h.lines))[:MAX_EVIDENCE_LINES + 3]
    return out
