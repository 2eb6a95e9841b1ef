"""The GPU spec table and the derivations: they load, resolve, cite, point at real rules, and their
numbers check out (pure Python, no torch)."""
from __future__ import annotations

import math

import pytest

from grpo_debug.skills.knowledge import derivations, find_gpu, gpu_specs
from grpo_debug.skills.loader import default_rules

REQUIRED_GPUS = {"rtx3090", "rtx4090", "a10g", "l4", "l40s", "a100_40gb", "a100_80gb",
                 "h100_sxm", "h200", "b200", "mi300x"}
REQUIRED_DERIVATIONS = {"fp16-exp-overflow-logit", "grpo-group-size-one-advantage",
                        "muon-global-clip-stall", "logprob-mismatch-importance-ratio",
                        "zero3-single-rank-overhead"}


def test_gpu_table_loads_with_required_ids():
    specs = gpu_specs()
    assert REQUIRED_GPUS <= set(specs)
    for spec in specs.values():
        assert spec.sources, spec.id


@pytest.mark.parametrize("name", ["rtx4090", "RTX 4090", "4090", "rtx-4090", "GeForce RTX 4090"])
def test_find_gpu_resolves_rtx4090(name):
    spec = find_gpu(name)
    assert spec is not None and spec.id == "rtx4090"


def test_find_gpu_h100_and_unknown():
    assert find_gpu("H100").id == "h100_sxm"
    assert find_gpu("h100 pcie").id == "h100_pcie"
    assert find_gpu("MI300X").vendor == "amd"
    assert find_gpu("no such gpu") is None


def test_gpu_facts_that_rules_rely_on():
    s = gpu_specs()
    assert s["rtx4090"].compute_capability == "8.9" and s["rtx4090"].fp8 and s["rtx4090"].consumer
    assert "no NVLink" in s["rtx4090"].interconnect
    assert s["rtx4090"].memory_gb == 24
    for ampere in ("rtx3090", "a10g", "a100_40gb", "a100_80gb"):
        assert not s[ampere].fp8, ampere
        assert s[ampere].bf16 and s[ampere].tf32, ampere
    for hopper in ("h100_sxm", "h200"):
        assert s[hopper].compute_capability == "9.0" and s[hopper].fp8
    assert s["b200"].compute_capability == "10.0"
    assert s["mi300x"].compute_capability.startswith("gfx")
    assert not any(g.consumer for g in s.values() if g.vendor == "amd")


def test_derivations_load_and_cover_the_brief():
    ds = derivations()
    assert REQUIRED_DERIVATIONS <= set(ds)
    for d in ds.values():
        assert d.sources and d.steps and d.rules, d.id
        for fb in d.per_framework:
            assert fb.sources, (d.id, fb.framework)


def test_derivation_rules_exist():
    rules = default_rules()
    for d in derivations().values():
        for rule_id in d.rules:
            assert rules.get(rule_id) is not None, (d.id, rule_id)


def test_no_yaml_comment_truncation():
    """An unquoted ' #123' would start a YAML comment and silently cut a value short."""
    muon = derivations()["muon-global-clip-stall"]
    assert "#5395" in muon.result and "#230" in muon.result
    fp16 = derivations()["fp16-exp-overflow-logit"]
    assert any("#10579" in s.note for s in fp16.sources)
    singleton = derivations()["grpo-group-size-one-advantage"]
    verl = next(fb for fb in singleton.per_framework if fb.framework == "verl")
    assert "#605" in verl.behaviour


def test_group_size_one_covers_each_framework():
    frameworks = {fb.framework.split()[0] for fb in derivations()["grpo-group-size-one-advantage"].per_framework}
    assert {"verl", "slime", "TRL", "OpenRLHF"} <= frameworks


# ---- numbers quoted in the derivations ----

def test_fp16_exp_overflow_threshold():
    fp16_max = (2 - 2 ** -10) * 2 ** 15
    assert fp16_max == 65504
    # round-to-nearest: the step at the top is 32, so values from 65504 + 16 = 65520 round to +inf
    overflow_from = fp16_max + 2 ** 4
    assert overflow_from == 65520
    assert round(math.log(overflow_from), 4) == 11.0901
    assert math.exp(11.09) < overflow_from < math.exp(11.0902)  # exp(11.09) = 65512.7 still rounds to 65504
    assert round(math.log(65504), 4) == 11.0899
    assert round(math.log(overflow_from / 8), 2) == 9.01
    assert round(math.log(overflow_from / 128), 2) == 6.24
    assert round(math.log(3.4028234663852886e38), 2) == 88.72
    import struct  # IEEE binary16 rounding as Python's struct does it ('e'): 65520 and above do not fit

    def as_fp16(x):
        return struct.unpack("<e", struct.pack("<e", x))[0]

    assert as_fp16(math.exp(11.09)) == 65504.0 and as_fp16(65519.9) == 65504.0
    with pytest.raises(OverflowError):
        as_fp16(65520.0)


def test_singleton_group_advantage_math():
    r = [0.7]
    mean = sum(r) / len(r)
    assert r[0] - mean == 0.0
    pop_var = sum((x - mean) ** 2 for x in r) / len(r)
    assert pop_var == 0.0
    with pytest.raises(ZeroDivisionError):
        _ = sum((x - mean) ** 2 for x in r) / (len(r) - 1)  # unbiased std: 0/0 (torch returns NaN)
    # verl's size-1 branch: mean 0, std 1, epsilon 1e-6 -> the raw reward
    assert math.isclose((r[0] - 0.0) / (1.0 + 1e-6), r[0], rel_tol=1e-5)


def test_muon_newton_schulz_small_singular_value_gain():
    a, b, c = 3.4445, -4.7750, 2.0315
    assert round(a ** 5, 1) == 484.9
    sigma = 1e-6
    for _ in range(5):
        sigma = a * sigma + b * sigma ** 3 + c * sigma ** 5
    assert math.isclose(sigma, 1e-6 * a ** 5, rel_tol=1e-6)
    # clip coefficient from the Megatron report: clip_grad 1.0, grad_norm ~5e7
    assert math.isclose(1.0 / 5e7, 2e-8)


def test_ppo_clip_edges_and_prob_gap_bound():
    assert round(math.log(1.2), 3) == 0.182
    assert round(math.log(0.8), 3) == -0.223
    assert round(math.exp(2), 2) == 7.39
    # |p_a - p_b| <= |log p_a - log p_b| for probabilities (mean value theorem, e^xi <= 1)
    for la, lb in [(-0.01, -0.02), (-5.0, -4.7), (-12.0, -11.5), (0.0, -0.3)]:
        assert abs(math.exp(la) - math.exp(lb)) <= abs(la - lb)


def test_zero_bytes_per_parameter():
    fp16_params, fp16_grads, k_adam = 2, 2, 12
    assert fp16_params + fp16_grads + k_adam == 16
    n_d = 1
    stage1 = 4 + 12 / n_d
    stage2 = 2 + 14 / n_d
    stage3 = 16 / n_d
    assert stage1 == stage2 == stage3 == 16
    assert 7e9 * 16 / 1e9 == 112
