"""Advice that does no harm (issue 12, part 6): the families' avoid answers are derived from the input's
framework and facts, never contradict each other or their rule, switch a safety off only where a rule's
mechanism (fired on the input) requires it and say why; wrong mechanisms per framework are gone."""
from __future__ import annotations

import pytest

from grpo_debug.server.cli import main
from grpo_debug.skills.loader import default_rules
from grpo_debug.tools.families.avoid import safety_effect
from grpo_debug.tools.families.muon_clipping import muon_clipping
from grpo_debug.tools.families.nan_guide import nan_guide
from grpo_debug.tools.triage import triage_text

DS_NO_MUON = """{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 8,
  "gradient_clipping": 1.0,
  "bf16": {"enabled": false},
  "fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 16},
  "optimizer": {"type": "AdamW", "params": {"lr": 1e-6, "weight_decay": 0.0}},
  "zero_optimization": {"stage": 2, "overlap_comm": true}
}
"""
MEGATRON_MUON = """torchrun --nproc_per_node 8 pretrain_gpt.py \\
    --tensor-model-parallel-size 2 \\
    --optimizer muon \\
    --clip-grad {clip} \\
    --bf16 \\
    --micro-batch-size 1 --global-batch-size 256 \\
    --lr 3e-4
"""
RULES = {r.id: r for r in default_rules()}
CLIP_KEYS = ("gradient_clipping", "clip_grad", "max_grad_norm", "max_norm")


def _patches(rep) -> list[tuple[str, object]]:
    return [(k, v) for it in rep.items for k, v in (it.fields.get("patch") or {}).items()]


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_nan_avoid_on_deepspeed_without_muon_keeps_clipping_and_reads_bf16(tmp_path):
    rep = nan_guide("avoid", path=_write(tmp_path, "ds.json", DS_NO_MUON))
    off = [(k, v) for k, v in _patches(rep) if k.rsplit(".", 1)[-1] in CLIP_KEYS and v in (0, 0.0)]
    assert not off, off  # was: gradient_clipping: 0 and clip_grad: 0
    assert not any("combined patch" in n and "clip" in n for n in rep.notes), rep.notes
    ids = {it.id for it in rep.items}
    assert not ids & {"precision-fp16-and-bf16", "bf16-config-on-gpu-without-bf16"}, ids  # bf16 is off here
    for it in rep.items:  # derived from the input's framework: DeepSpeed
        fws = RULES[it.id].applies_to.frameworks
        assert not fws or "deepspeed" in fws, (it.id, fws)


def test_nan_avoid_without_input_has_no_gpu_profile_and_no_patch():
    rep = nan_guide("avoid")
    assert "rtx4090-grpo-profile" not in {it.id for it in rep.items}
    assert not _patches(rep) and not any(n.startswith("combined patch") for n in rep.notes)
    assert all(it.fields.get("status") == "conditional" and it.body.startswith("Only when:") for it in rep.items)


def _clip_on_and_off(rep) -> tuple[list, list]:
    on, off = [], []
    for it in rep.items:
        eff = safety_effect(RULES[it.id]).get("gradient clipping")
        (on if eff == "on" else off if eff == "off" else []).append(it)
    return on, off


@pytest.mark.parametrize("clip", ["0", "1.0"])
def test_muon_avoid_never_says_clip_0_and_clip_1_unscoped(tmp_path, clip):
    for rep in (muon_clipping("avoid"), muon_clipping("avoid", path=_write(tmp_path, "m.sh", MEGATRON_MUON.format(clip=clip)))):
        on, off = _clip_on_and_off(rep)
        if on and off:
            assert all("Not where" in it.body for it in on), [it.body for it in on]
        vals = {v for k, v in _patches(rep) if k.rsplit(".", 1)[-1] in CLIP_KEYS}
        assert len(vals) <= 1, vals


def test_safety_off_only_where_a_rule_fired_and_says_why(tmp_path):
    for rep in (muon_clipping("avoid", path=_write(tmp_path, "m.sh", MEGATRON_MUON.format(clip="1.0"))),
                nan_guide("avoid", path=_write(tmp_path, "ds.json", DS_NO_MUON)), muon_clipping("avoid")):
        for it in rep.items:
            if safety_effect(RULES[it.id]).get("gradient clipping") == "off":
                assert "only because of this mechanism" in it.body, it.body
                if it.fields.get("patch"):
                    assert it.fields["status"] == "raised on this input"


def test_muon_avoid_on_megatron_patches_clip_grad_only():
    text = MEGATRON_MUON.format(clip="1.0")
    assert not _patches(muon_clipping("avoid", text=text))  # a launch script alone: no safeguard off (issue 24)
    stall = "".join(f" iteration {i * 10:8d}/    2000 | lm loss: {loss} | loss scale: 1.0 | grad norm: {g} |\n"
                    for i, (loss, g) in enumerate([("2.41E+00", "5.1E+07"), ("2.10E+00", "8.3E+07"), ("1.87E+00", "2.4E+08"),
                                                   ("1.65E+00", "9.7E+08"), ("1.5810E+00", "3.1E+09"), ("1.5802E+00", "8.8E+09"),
                                                   ("1.5809E+00", "2.2E+10"), ("1.5805E+00", "5.6E+10"), ("1.5807E+00", "1.1E+11"),
                                                   ("1.5804E+00", "2.0E+11")], 1))
    keys = {k for k, _ in _patches(muon_clipping("avoid", text=text + stall))}
    assert keys == {"clip_grad"}, keys  # with the stall of #5394 in the log; no DeepSpeed gradient_clipping


VERL_ENTROPY_ZERO = """algorithm:
  adv_estimator: grpo
actor_rollout_ref:
  actor:
    entropy_coeff: 0
  rollout:
    n: 8
# step:50 - actor/entropy:0.612 - critic/score/mean:0.713
# step:100 - actor/entropy:0.745 - critic/score/mean:0.742
# step:150 - actor/entropy:1.208 - critic/score/mean:0.688
# step:200 - actor/entropy:2.371 - critic/score/mean:0.402
"""


def test_entropy_advice_knows_the_coefficient_is_already_zero():
    res = triage_text(VERL_ENTROPY_ZERO, hint="yaml")
    f = next(f for f in res.findings if any(c.rule_id == "entropy-climb" for c in f.causes))
    assert "Already so in this input: actor_rollout_ref.actor.entropy_coeff = 0" in f.fix, f.fix
    assert not (f.patch or {}).get("actor_rollout_ref.actor.entropy_coeff") and not f.edits


def test_trl_entropy_coef_is_named_with_its_release():
    fix = RULES["entropy-climb"].fix.summary
    assert "TRL entropy_coef 0.0 from TRL 1.8.0" in " ".join(fix.split()), fix  # GRPOConfig.entropy_coef: PR #6140


def test_cli_avoid_text_has_no_contradiction(capsys, tmp_path):
    assert main(["muon_clipping", "avoid"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--clip-grad 0" not in out or "Not where" in out
