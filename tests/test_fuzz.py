"""Property tests (hypothesis): every MCP tool called in process with generated arguments (wrong types, huge
strings, unicode, control characters, negative and huge numbers, missing and extra keys).

For every call: the call returns (no unhandled exception); a failure is an isError result whose text names
the bad argument or the problem (never the SDK's redacted 'Error executing tool X' alone, never our
'internal error' fallback); a success carries structured_content. The total number of calls is counted and
must reach 2,000 per run.

Left out on purpose: `numerics=True` (a torch subprocess per call; the isolation test covers it); it still
gets wrong-typed values. `cluster` is fuzzed freely: the in-process server has no Ray address configured.
"""
from __future__ import annotations

import re
import time

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow  # property-based: hundreds of generated inputs per test
from mcp import Client

from grpo_debug.server.app import build_server
from grpo_debug.tools.families import OPERATIONS

CALLS = {"n": 0, "errors": 0, "t0": None}
PER_TOOL: dict[str, list[int]] = {}  # tool -> [calls, isError]
PROPS: dict[str, list[str]] = {}  # tool -> its argument names

def fuzz_settings(n: int) -> settings:
    return settings(deadline=None, database=None, suppress_health_check=list(HealthCheck), max_examples=n)

# ---------------------------------------------------------------------------- strategies

control = st.text(alphabet=st.characters(max_codepoint=0x1F) | st.sampled_from("\x7f\u0085\u2028\u2029\ufeff\u202e"),
                  max_size=50)
unicode_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)
huge = st.builds(lambda s, n: (s or "x") * n, st.text(max_size=20), st.integers(1000, 20_000))
numbers = st.one_of(st.integers(-(10**30), 10**30), st.sampled_from([0, -1, 2**63, -(2**63), 10**100]),
                    st.floats(allow_nan=True, allow_infinity=True))
scalar_junk = st.one_of(st.none(), st.booleans(), numbers, control, unicode_text)
junk = st.recursive(scalar_junk, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                             max_size=4), max_leaves=8)
log_lines = st.lists(st.sampled_from([
    "step:3 - actor/grad_norm:nan - actor/pg_loss:0.12", "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "(TaskRunner pid=123) WARN: rank 0 grad_norm is not finite: nan", "actor_rollout_ref.actor.optim.clip_grad: 0.0",
    '{"gradient_clipping": 0.0, "fp16": {"enabled": true}}', "torchrun pretrain_gpt.py --optimizer muon --fp16",
    "entropy_coeff: 0.01", "NCCL WARN Timeout", "\x1b[31mERROR\x1b[0m", "step:1 - critic/score/mean:0.0"]),
    max_size=30).map("\n".join)
texts = st.one_of(log_lines, unicode_text, control, huge, st.builds("".join, st.lists(unicode_text | control, max_size=5)))
paths = st.one_of(
    st.sampled_from(["../../etc/passwd", "/etc/passwd", "/dev/zero", "/dev/null", "/proc/self/environ", ".", "/",
                     "~", "~/.ssh/id_rsa", "tools/examples/verl_grpo_nan.log", "tools", "README.md", "nonexistent.log",
                     "a/../../b", "\\\\server\\share", "file:///etc/passwd", "C:\\x", "x" * 5000, "", " "]),
    unicode_text, control)
str_or_junk = lambda s: st.one_of(s, s, s, junk)  # noqa: E731  (mostly the right type, sometimes not)
not_true = st.one_of(st.just(False), st.sampled_from([None, 0, "no", "false", "maybe", 2, -1, 3.5, [], {}, "x" * 100]))


def with_extras(required: dict, optional: dict):
    """Known keys (each may be missing) plus a few unknown keys."""
    return st.builds(lambda known, extra: {**extra, **known},
                     st.fixed_dictionaries(required, optional=optional),
                     st.dictionaries(st.text(min_size=1, max_size=12), junk, max_size=2))


def family_args(family: str):
    ops = OPERATIONS[family] + ("rtx4090",)
    return with_extras({}, {"operation": str_or_junk(st.sampled_from(ops + ("explode", "", "GPU"))),
                            "text": str_or_junk(texts), "path": str_or_junk(paths),
                            "gpu": str_or_junk(st.sampled_from(["rtx4090", "h100_sxm", "a100_80gb", "voodoo5", ""]) | unicode_text)})


def family_valid(family: str):
    ops = OPERATIONS[family] + ("rtx4090",)
    return st.fixed_dictionaries({"operation": st.sampled_from(ops)},
                                 optional={"text": texts, "gpu": st.sampled_from(["rtx4090", "h100_sxm", "a100_80gb"])})


def _rule_ids() -> list[str]:
    from grpo_debug.skills.loader import default_rules

    return sorted(r.id for r in default_rules())


estimate_keys = ["params_b", "config_json", "dtype", "zero_stage", "fsdp", "dp", "tp", "pp", "lora_rank", "seq_len",
                 "micro_batch", "gpu", "rollout_mem_fraction", "optimizer", "bogus_key"]
VALID = {  # well-typed arguments (the engine's paths, not only validation), half of the examples
    "triage": st.one_of(st.fixed_dictionaries({"text": texts}, optional={"max_findings": st.integers(1, 100)}),
                        st.fixed_dictionaries({"path": st.sampled_from(["tools/examples/verl_grpo_nan.log", "README.md",
                                                                        "pyproject.toml", "setup.py"])})),
    "check_config": st.fixed_dictionaries({"text": texts}),
    "probe_host": st.fixed_dictionaries({}, optional={
        "checkpoint": st.sampled_from(["tools", "tests", "."]),
        "estimate": st.fixed_dictionaries({}, optional={"params_b": st.floats(0.1, 1000), "dp": st.integers(1, 64),
                                                        "zero_stage": st.integers(0, 3), "seq_len": st.integers(1, 10**6),
                                                        "gpu": st.sampled_from(["rtx4090", "h100_sxm", "nope"])})}),
    "suggest": st.fixed_dictionaries({"text": texts}),
    "explain_rule": st.fixed_dictionaries({"rule_id": st.sampled_from(_rule_ids())}),
    **{f: family_valid(f) for f in OPERATIONS},
}
ARGS = {
    "triage": with_extras({}, {"text": str_or_junk(texts), "path": str_or_junk(paths), "max_findings": str_or_junk(numbers)}),
    "check_config": with_extras({}, {"text": str_or_junk(texts), "path": str_or_junk(paths)}),
    "probe_host": with_extras({}, {
        "numerics": not_true, "checkpoint": str_or_junk(paths), "tokenizer": str_or_junk(paths),
        "stop": str_or_junk(st.lists(unicode_text | control, max_size=5)),
        "estimate": st.one_of(st.dictionaries(st.sampled_from(estimate_keys), scalar_junk | huge | junk, max_size=5), junk),
        "cluster": st.one_of(st.booleans(), st.none(), numbers, st.lists(st.integers(), max_size=2), unicode_text),
    }),
    "suggest": with_extras({}, {"text": str_or_junk(texts)}),
    "explain_rule": with_extras({}, {"rule_id": str_or_junk(st.sampled_from(["nan", "", "a" * 300]) | unicode_text | control)}),
    **{f: family_args(f) for f in OPERATIONS},
}

# ---------------------------------------------------------------------------- one client for the module


@pytest.fixture(scope="module")
def client():
    with anyio.from_thread.start_blocking_portal() as portal:
        cm = portal.wrap_async_context_manager(Client(build_server()))
        c = cm.__enter__()
        for t in portal.call(c.list_tools).tools:
            PROPS[t.name] = list(t.input_schema.get("properties", {}))
        try:
            CALLS["t0"] = time.perf_counter()
            yield portal, c
        finally:
            cm.__exit__(None, None, None)
    took = time.perf_counter() - CALLS["t0"]
    print(f"\nfuzz: {CALLS['n']} calls ({CALLS['errors']} isError) in {took:.1f} s; per tool (calls, isError): "
          + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(PER_TOOL.items())))


GENERIC = re.compile(r"^Error executing tool [\w-]+:?\s*$")
PROBLEM_WORDS = ("give", "limit", "unknown", "outside", "no such", "not a", "needs", "must", "invalid", "path",
                 "empty", "expected", "too long", "out of range", "at most", "operation", "GPU", "gpu", "climbs out",
                 "cannot", "NUL", "symlink", "FIFO", "device", "socket", "directory", "folder")


def check(portal, c, tool: str, args: dict) -> None:
    r = portal.call(c.call_tool, tool, args)  # must return, whatever the arguments
    CALLS["n"] += 1
    tally = PER_TOOL.setdefault(tool, [0, 0])
    tally[0] += 1
    tally[1] += bool(r.is_error)
    text = " ".join(getattr(b, "text", "") for b in (r.content or []))
    if r.is_error:
        CALLS["errors"] += 1
        assert text and not GENERIC.match(text), (tool, args, text)
        assert "internal error" not in text, (tool, repr(args)[:500], text)
        names = {str(k) for k in args} | set(PROPS.get(tool, ()))
        named = [k for k in names if re.search(rf"\b{re.escape(k)}\b", text)]
        assert named or any(w in text for w in PROBLEM_WORDS), (tool, repr(args)[:500], text)
    else:
        assert isinstance(r.structured_content, dict) and r.structured_content, (tool, args, text[:300])


# 12 tools; max_examples below add up to 2,150 calls a run
EXAMPLES = {"triage": 350, "check_config": 250, "probe_host": 250, "suggest": 150, "explain_rule": 150,
            "playbook": 200, "nan_guide": 200, "muon_clipping": 200, "stream_safety": 200, "knowledge_map": 200}


@pytest.mark.parametrize("tool", sorted(EXAMPLES))
def test_fuzz_tool(client, tool):
    portal, c = client

    @fuzz_settings(EXAMPLES[tool])
    @given(args=st.one_of(VALID[tool], ARGS[tool]))
    def run(args):
        check(portal, c, tool, args)

    run()


def test_fuzz_call_count(client):
    """Runs last in this module: the properties above made at least 2,000 calls."""
    if set(PER_TOOL) != set(EXAMPLES):
        pytest.skip("only some of the fuzz tests ran")
    assert CALLS["n"] >= 2000, CALLS
