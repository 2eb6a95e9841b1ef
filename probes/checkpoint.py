"""Checkpoint folder probe: what layout a folder holds (Megatron, DeepSpeed, Hugging Face) and what is
wrong with it for an RL post-training run (slime / Relax / verl / OpenRLHF loading it).

Reads only file names, sizes and small JSON/text files (config.json, index JSON, tracker files, the first
bytes of a weight file to spot a Git-LFS pointer). Never reads a weight file whole. A missing path is a
report with an issue, not an exception; anything unexpected becomes :class:`Unknown` (``@probe``).

Facts used:
- Megatron loads only a directory holding ``latest_checkpointed_iteration.txt`` (content: an iteration
  number or ``release``); iterations live in ``iter_XXXXXXX`` (7 digits) or ``release``; the legacy
  format has ``mp_rank_XX[_YYY]/model_optim_rng.pt``, the torch_dist (distributed checkpoint) format has
  ``.metadata`` and ``__<rank>_<n>.distcp`` files. Source: slime FAQ (garbled text when ``--load`` has no
  latest_checkpointed_iteration.txt; ``--ckpt-step`` picks an iteration).
- DeepSpeed writes ``global_stepN/`` plus a ``latest`` file naming the tag; Megatron-LM's ``--load`` does not
  read it (convert with DeepSpeed's ``zero_to_fp32.py``, then to HF or Megatron).
- Hugging Face: ``config.json``, tokenizer files, ``generation_config.json``, ``model.safetensors`` or
  ``model.safetensors.index.json`` (``weight_map``: tensor -> shard file) plus shards.
"""
from __future__ import annotations

import re
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from grpo_debug.probes.base import Confined, probe

Severity = Literal["error", "warning", "info"]

TRACKER = "latest_checkpointed_iteration.txt"
MAX_JSON_BYTES = 64 * 1024 * 1024  # index files of huge models are a few MB; never parse anything bigger
LFS_PREFIX = b"version https://git-lfs"

_ITER_RE = re.compile(r"^iter_(\d+)$")
_MP_RE = re.compile(r"^mp_rank_\d+(_\d+)?$")
_DISTCP_RE = re.compile(r"^__\d+_\d+\.distcp$")
_GSTEP_RE = re.compile(r"^global_step(\d+)$")
_SHARD_RE = re.compile(r"^(?P<stem>.+)-(?P<i>\d+)-of-(?P<n>\d+)\.(?P<ext>safetensors|bin)$")

TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt",
                   "merges.txt", "special_tokens_map.json"]


class CheckpointIssue(BaseModel):
    severity: Severity
    message: str
    fix: str = ""


class MegatronInfo(BaseModel):
    tracker_present: bool
    tracker_value: str | None = Field(None, description="Raw content of latest_checkpointed_iteration.txt.")
    iteration: int | None = Field(None, description="Parsed iteration; None for 'release' or unparsable.")
    release: bool = False
    iter_dirs: list[str] = Field(default_factory=list)
    named_iter_dir: str | None = Field(None, description="Directory the tracker names (iter_0000100 / release).")
    named_iter_dir_exists: bool | None = None
    mp_rank_dirs: list[str] = Field(default_factory=list, description="mp_rank_* in the named (or newest) iteration.")
    torch_dist: bool = Field(False, description="torch_dist format markers (.metadata / __*_*.distcp) present.")
    distcp_files: int = 0
    format: Literal["legacy", "torch_dist", "unknown"] = "unknown"


class DeepSpeedInfo(BaseModel):
    global_step_dirs: list[str] = Field(default_factory=list)
    latest_value: str | None = Field(None, description="Content of the 'latest' file.")
    latest_exists: bool | None = None
    zero_to_fp32_script: bool = False


class HfInfo(BaseModel):
    config_present: bool = False
    model_type: str | None = None
    torch_dtype: str | None = None
    architectures: list[str] = Field(default_factory=list)
    vocab_size: int | None = None
    num_hidden_layers: int | None = None
    hidden_size: int | None = None
    tokenizer_files: list[str] = Field(default_factory=list, description="Tokenizer files present.")
    generation_config_present: bool = False
    generation_eos_token_id: int | list[int] | None = None
    index_file: str | None = None
    shards_expected: list[str] = Field(default_factory=list)
    shards_present: list[str] = Field(default_factory=list)
    missing_shards: list[str] = Field(default_factory=list)
    lfs_pointer_files: list[str] = Field(default_factory=list)
    single_file: str | None = Field(None, description="model.safetensors / pytorch_model.bin when unsharded.")
    weight_bytes: int = Field(0, description="Sum of weight file sizes on disk.")


class CheckpointReport(BaseModel):
    path: str
    exists: bool
    layouts: list[Literal["megatron", "deepspeed", "hf"]] = Field(default_factory=list)
    megatron: MegatronInfo | None = None
    deepspeed: DeepSpeedInfo | None = None
    hf: HfInfo | None = None
    issues: list[CheckpointIssue] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(i.severity == "error" for i in self.issues)


_FS: ContextVar[Confined] = ContextVar("checkpoint_folder")


def _fs() -> Confined:
    """The folder being inspected: every read below goes through it (links confined, regular files only)."""
    return _FS.get()


def _isdir(p: Path) -> bool:
    return _fs().is_dir(p)


def _isfile(p: Path) -> bool:
    return _fs().is_file(p)


def _size(p: Path) -> int:
    return _fs().size(p)


def _read_small_text(p: Path, limit: int = 4096) -> str | None:
    return _fs().text(p, limit)


def _read_json(p: Path, limit: int = MAX_JSON_BYTES) -> tuple[Any, str | None]:
    """(data, error). Refuses files over ``limit`` bytes, links out of the folder, devices and FIFOs."""
    return _fs().json(p, limit)


def _is_lfs_pointer(p: Path) -> bool:
    if _size(p) > 1024:
        return False
    return (_fs().text(p, 1024) or "").encode()[:len(LFS_PREFIX)] == LFS_PREFIX


def _names(p: Path) -> list[str]:
    return _fs().names(p)


def _megatron_format(d: Path) -> tuple[list[str], bool, int]:
    names = _names(d)
    mp = [n for n in names if _MP_RE.match(n) and _isdir(d / n)]
    distcp = [n for n in names if _DISTCP_RE.match(n)]
    torch_dist = bool(distcp) or ".metadata" in names
    return mp, torch_dist, len(distcp)


def _follow_tracker(root: Path, tracker: Path, iter_dirs: list[str], info: MegatronInfo,
                    issues: list[CheckpointIssue]) -> str | None:
    """Read latest_checkpointed_iteration.txt into ``info``; the iteration folder it names (None when unreadable)."""
    raw = (_read_small_text(tracker) or "").strip()
    info.tracker_value = raw
    if raw == "release":
        info.release = True
        target = "release"
    elif raw.isdigit():
        info.iteration = int(raw)
        target = f"iter_{info.iteration:07d}"
    else:
        issues.append(CheckpointIssue(
            severity="error",
            message=f"{TRACKER} holds {raw!r}; Megatron expects an integer iteration or 'release'",
            fix=f"write the iteration number (e.g. the newest of {info.iter_dirs[-3:] or 'iter_XXXXXXX'}) into {TRACKER}",
        ))
        target = iter_dirs[-1] if iter_dirs else None
    if info.release or info.iteration is not None:
        info.named_iter_dir = target
        info.named_iter_dir_exists = _isdir(root / target)
        if not info.named_iter_dir_exists:
            issues.append(CheckpointIssue(
                severity="error",
                message=(f"{TRACKER} names {target!r} but that directory does not exist "
                         f"(present: {', '.join(info.iter_dirs) or 'none'})"),
                fix=("fix the tracker to an existing iteration or pass --ckpt-step <N> for one that exists; "
                     "an interrupted save or a partial copy leaves this state"),
            ))
    return target


def _check_iteration(root: Path, target: str, info: MegatronInfo, issues: list[CheckpointIssue]) -> None:
    """The iteration folder's format (legacy mp_rank_* or torch_dist) and whether its save is complete."""
    mp, dist, ncp = _megatron_format(root / target)
    info.mp_rank_dirs, info.torch_dist, info.distcp_files = mp, dist, ncp
    info.format = "torch_dist" if dist else ("legacy" if mp else "unknown")
    if not mp and not dist:
        issues.append(CheckpointIssue(
            severity="error",
            message=f"{target} has neither mp_rank_* folders (legacy) nor .metadata/*.distcp (torch_dist): empty or partial save",
            fix="use an earlier iteration (--ckpt-step) or re-copy the checkpoint",
        ))
    elif dist and ".metadata" not in _names(root / target):
        issues.append(CheckpointIssue(
            severity="error",
            message=f"{target} has .distcp shards but no .metadata file: torch_dist checkpoint incomplete",
            fix="re-copy the iteration folder including hidden files (cp -r / rsync -a, not a glob that skips dotfiles)",
        ))


def _inspect_megatron(root: Path, names: list[str], issues: list[CheckpointIssue]) -> MegatronInfo | None:
    tracker = root / TRACKER
    iter_dirs = sorted(n for n in names if _ITER_RE.match(n) and _isdir(root / n))
    has_release = "release" in names and _isdir(root / "release")
    mp_here, dist_here, ncp_here = _megatron_format(root)
    if not (_isfile(tracker) or iter_dirs or has_release or mp_here or dist_here):
        return None

    info = MegatronInfo(tracker_present=_isfile(tracker), iter_dirs=iter_dirs + (["release"] if has_release else []))

    if mp_here or dist_here:
        # The user pointed at an iteration folder itself (or a bare model folder without tracker).
        info.mp_rank_dirs, info.torch_dist, info.distcp_files = mp_here, dist_here, ncp_here
        info.format = "torch_dist" if dist_here else "legacy"
        if not info.tracker_present:
            parent = root.parent
            parent_has_tracker = (parent / TRACKER).is_file()
            issues.append(CheckpointIssue(
                severity="error",
                message=(f"{root.name} holds Megatron weights ({info.format}) but no {TRACKER}; Megatron loads only "
                         "directories with latest_checkpointed_iteration.txt (slime FAQ), so --load here gives "
                         "random or garbled weights"),
                fix=(f"point --load/--ref-load at the parent {parent}" + (" (it has the tracker)" if parent_has_tracker
                     else f" and write {TRACKER} there with the iteration number")
                     + ", or pass --ckpt-step <N>"),
            ))
        return info

    if not info.tracker_present:
        newest = iter_dirs[-1] if iter_dirs else "release"
        issues.append(CheckpointIssue(
            severity="error",
            message=(f"Megatron iteration folders ({', '.join(info.iter_dirs[:5])}{'...' if len(info.iter_dirs) > 5 else ''}) "
                     f"but no {TRACKER}: Megatron loads only directories with latest_checkpointed_iteration.txt "
                     "(slime FAQ); a run started from here loads nothing and generates garbled text"),
            fix=(f"point --load/--ref-load at one that has it, or pass --ckpt-step <N>, or create it: "
                 f"echo {int(_ITER_RE.match(newest).group(1)) if _ITER_RE.match(newest) else 'release'} > {root / TRACKER}"),
        ))
        target = newest
    else:
        target = _follow_tracker(root, tracker, iter_dirs, info, issues)

    if target and _isdir(root / target):
        _check_iteration(root, target, info, issues)
    return info


def _inspect_deepspeed(root: Path, names: list[str], issues: list[CheckpointIssue]) -> DeepSpeedInfo | None:
    steps = sorted((n for n in names if _GSTEP_RE.match(n) and _isdir(root / n)),
                   key=lambda n: int(_GSTEP_RE.match(n).group(1)))
    latest = root / "latest"
    if not steps and not _isfile(latest):
        return None
    info = DeepSpeedInfo(global_step_dirs=steps, zero_to_fp32_script="zero_to_fp32.py" in names)
    if _isfile(latest):
        info.latest_value = (_read_small_text(latest) or "").strip()
        info.latest_exists = bool(info.latest_value) and _isdir(root / info.latest_value)
        if not info.latest_exists:
            issues.append(CheckpointIssue(
                severity="error",
                message=f"DeepSpeed 'latest' names {info.latest_value!r}, which is not a folder here",
                fix=f"write an existing tag ({', '.join(steps[-3:]) or 'none present'}) into {latest}",
            ))
    issues.append(CheckpointIssue(
        severity="warning",
        message=("DeepSpeed checkpoint layout (global_stepN/ + latest): not loadable by plain Megatron-LM --load "
                 "(it expects latest_checkpointed_iteration.txt and iter_XXXXXXX/), nor by HF from_pretrained"),
        fix=("resume it with the same DeepSpeed engine (load_checkpoint), or consolidate with "
             f"python {root / 'zero_to_fp32.py'} {root} <out_dir> and then convert the HF/fp32 weights "
             "(e.g. slime/Megatron HF->torch_dist conversion) before --load"),
    ))
    return info


def _hf_config(root: Path, names: list[str], info: HfInfo, issues: list[CheckpointIssue]) -> None:
    """config.json: model type, dtype, architectures and sizes into ``info``."""
    cfg: dict = {}
    if "config.json" in names:
        data, err = _read_json(root / "config.json", 4 * 1024 * 1024)
        if err or not isinstance(data, dict):
            issues.append(CheckpointIssue(severity="error", message=f"config.json unreadable: {err or 'not an object'}",
                                          fix="re-download config.json for this model"))
        else:
            info.config_present = True
            cfg = data
            text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
            get = lambda k: cfg.get(k, text.get(k))  # noqa: E731
            info.model_type = cfg.get("model_type")
            dt = cfg.get("torch_dtype", cfg.get("dtype", text.get("torch_dtype")))
            info.torch_dtype = str(dt) if dt is not None else None
            info.architectures = list(cfg.get("architectures") or [])
            for k in ("vocab_size", "num_hidden_layers", "hidden_size"):
                v = get(k)
                if isinstance(v, int):
                    setattr(info, k, v)
    else:
        issues.append(CheckpointIssue(severity="error", message="weight files but no config.json: not loadable as a HF model",
                                      fix="copy config.json (and tokenizer files) from the base model"))


def _hf_side_files(root: Path, names: list[str], info: HfInfo, issues: list[CheckpointIssue]) -> None:
    """The dtype the rollout engine will pick, tokenizer files, generation_config.json and its eos ids."""
    if info.torch_dtype in ("float32", "torch.float32"):
        issues.append(CheckpointIssue(
            severity="warning",
            message=("torch_dtype float32: vLLM dtype=auto downcasts fp32 to fp16 (not bf16), which overflows for "
                     "models trained in bf16; training in bf16 while the rollout runs fp16 also makes the log-prob mismatch"),
            fix="pass dtype bfloat16 to the rollout engine (vLLM --dtype bfloat16 / verl rollout.dtype=bfloat16; SGLang --dtype bfloat16), or save the checkpoint in bf16",
        ))

    if not any(n in names for n in ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt")):
        issues.append(CheckpointIssue(
            severity="warning",
            message="no tokenizer files (tokenizer.json / tokenizer.model / vocab.*): rollout engines and --hf-checkpoint loaders need them next to config.json",
            fix="copy the tokenizer files of the base model into this folder (or pass the tokenizer path separately)",
        ))
    elif "tokenizer_config.json" not in names:
        issues.append(CheckpointIssue(
            severity="info",
            message="no tokenizer_config.json: the chat template and eos_token come from there",
            fix="copy tokenizer_config.json from the base model",
        ))

    if "generation_config.json" in names:
        info.generation_config_present = True
        data, _ = _read_json(root / "generation_config.json", 1024 * 1024)
        if isinstance(data, dict):
            eos = data.get("eos_token_id")
            if isinstance(eos, int) or (isinstance(eos, list) and all(isinstance(x, int) for x in eos)):
                info.generation_eos_token_id = eos
    else:
        issues.append(CheckpointIssue(
            severity="info",
            message="no generation_config.json: vLLM/SGLang then stop only on the tokenizer's eos_token, not on extra turn terminators",
            fix="copy generation_config.json from the base/instruct model, or pass stop_token_ids (slime --rollout-stop-token-ids)",
        ))
    if info.vocab_size and info.generation_eos_token_id is not None:
        eos_ids = info.generation_eos_token_id if isinstance(info.generation_eos_token_id, list) else [info.generation_eos_token_id]
        bad = [e for e in eos_ids if e >= info.vocab_size]
        if bad:
            issues.append(CheckpointIssue(severity="error",
                                          message=f"generation_config eos_token_id {bad} >= vocab_size {info.vocab_size}",
                                          fix="generation_config.json belongs to another model; copy the right one"))


def _hf_indexed(root: Path, index_name: str, info: HfInfo, issues: list[CheckpointIssue]) -> None:
    """Sharded weights with an index JSON: missing, empty or truncated shards."""
    info.index_file = index_name
    data, err = _read_json(root / index_name)
    wm = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(wm, dict):
        issues.append(CheckpointIssue(severity="error", message=f"{index_name} unreadable or without weight_map: {err or ''}".strip(),
                                      fix=f"re-download {index_name}"))
    else:
        info.shards_expected = sorted(set(map(str, wm.values())))
        info.shards_present = [s for s in info.shards_expected if _isfile(root / s)]
        info.missing_shards = [s for s in info.shards_expected if s not in info.shards_present]
        if info.missing_shards:
            issues.append(CheckpointIssue(
                severity="error",
                message=f"{len(info.missing_shards)} of {len(info.shards_expected)} shards listed in {index_name} are missing: "
                        f"{', '.join(info.missing_shards[:8])}{'...' if len(info.missing_shards) > 8 else ''}",
                fix="re-download the missing shards (huggingface-cli download <repo> --local-dir <dir> resumes), or re-copy the save",
            ))
        empty = [s for s in info.shards_present if _size(root / s) == 0]
        if empty:
            issues.append(CheckpointIssue(severity="error", message=f"empty shard files: {', '.join(empty[:5])}",
                                          fix="re-download or re-save them (interrupted write)"))
        total = (data.get("metadata") or {}).get("total_size") if isinstance(data.get("metadata"), dict) else None
        shard_bytes = sum(_size(root / s) for s in info.shards_present)
        if isinstance(total, (int, float)) and not info.missing_shards and shard_bytes < total:
            issues.append(CheckpointIssue(
                severity="error",
                message=f"shards hold {shard_bytes} bytes, less than the index metadata.total_size {int(total)}: truncated download",
                fix="re-download the shards whose sizes differ from the hub's",
            ))


def _hf_unindexed(root: Path, names: list[str], present_weights: list[str], info: HfInfo,
                  issues: list[CheckpointIssue]) -> None:
    """One weights file, or shards without an index (their -i-of-n sequence checked)."""
    single = next((n for n in ("model.safetensors", "pytorch_model.bin") if n in names), None)
    info.single_file = single
    # sharded files without an index: check the -0000i-of-0000n sequence
    groups: dict[tuple[str, str, int, int], set[int]] = {}
    for n in present_weights:
        m = _SHARD_RE.match(n)
        if m:
            groups.setdefault((m["stem"], m["ext"], int(m["n"]), len(m["n"])), set()).add(int(m["i"]))
    for (stem, ext, total_n, width), have in groups.items():
        miss = [f"{stem}-{i:0{width}d}-of-{total_n:0{width}d}.{ext}" for i in range(1, total_n + 1) if i not in have]
        info.shards_expected += [f"{stem}-{i:0{width}d}-of-{total_n:0{width}d}.{ext}" for i in range(1, total_n + 1)]
        info.missing_shards += miss
        issues.append(CheckpointIssue(
            severity="error",
            message=f"sharded weights ({stem}-*-of-{total_n:0{width}d}.{ext}) without an index JSON"
                    + (f"; missing: {', '.join(miss[:8])}" if miss else ""),
            fix=f"copy {'model.safetensors.index.json' if ext == 'safetensors' else 'pytorch_model.bin.index.json'} from the source"
                + (" and the missing shards" if miss else ""),
        ))
    if not single and not groups and info.config_present:
        issues.append(CheckpointIssue(
            severity="error" if not present_weights else "warning",
            message="config.json but no model.safetensors / pytorch_model.bin / index: not a loadable HF model folder"
                    if not present_weights else f"unrecognised weight files: {', '.join(present_weights[:5])}",
            fix="point at the folder that holds the weights, or convert the training checkpoint to HF first",
        ))


def _inspect_hf(root: Path, names: list[str], issues: list[CheckpointIssue]) -> HfInfo | None:
    weight_like = [n for n in names if n.endswith((".safetensors", ".bin")) or n.endswith(".index.json")]
    if "config.json" not in names and not weight_like:
        return None
    info = HfInfo(tokenizer_files=[n for n in TOKENIZER_FILES if n in names])

    _hf_config(root, names, info, issues)
    _hf_side_files(root, names, info, issues)

    # weights
    index_name = next((n for n in ("model.safetensors.index.json", "pytorch_model.bin.index.json") if n in names), None)
    present_weights = [n for n in names if n.endswith((".safetensors", ".bin")) and _isfile(root / n)]
    for n in present_weights:
        try:
            info.weight_bytes += _size(root / n)
        except OSError:
            pass
    info.lfs_pointer_files = [n for n in present_weights if _is_lfs_pointer(root / n)]
    if info.lfs_pointer_files:
        issues.append(CheckpointIssue(
            severity="error",
            message=f"Git-LFS pointer files instead of weights: {', '.join(info.lfs_pointer_files[:5])}",
            fix="git lfs pull in the clone (or download with huggingface-cli download)",
        ))

    if index_name:
        _hf_indexed(root, index_name, info, issues)
    else:
        _hf_unindexed(root, names, present_weights, info, issues)
    return info


@probe
def inspect_checkpoint(path: str | Path) -> CheckpointReport:
    """Describe the checkpoint folder at ``path`` and list its problems (never raises; Unknown on surprises)."""
    root = Path(path).expanduser()
    report = CheckpointReport(path=str(root), exists=root.exists())
    if not root.exists():
        report.issues.append(CheckpointIssue(severity="error", message=f"{root} does not exist",
                                             fix="check the path (and that the filesystem is mounted on this node)"))
        return report
    if not root.is_dir():
        report.issues.append(CheckpointIssue(
            severity="error", message=f"{root} is a file; checkpoints are folders",
            fix=f"point at its folder {root.parent}"))
        return report
    token = _FS.set(Confined(root))
    try:
        names = _names(root)
        report.megatron = _inspect_megatron(root, names, report.issues)
        report.deepspeed = _inspect_deepspeed(root, names, report.issues)
        report.hf = _inspect_hf(root, names, report.issues)
        refused = _fs().refused
    finally:
        _FS.reset(token)
    for name, why in list(refused.items())[:20]:
        report.issues.append(CheckpointIssue(
            severity="warning", message=f"{name}: {why}",
            fix="copy the real file into the checkpoint folder (or probe the folder it belongs to); the probe reads "
                "only regular files inside the folder it is given"))
    report.layouts = [k for k, v in (("megatron", report.megatron), ("deepspeed", report.deepspeed), ("hf", report.hf)) if v]
    if not report.layouts:
        report.issues.append(CheckpointIssue(
            severity="error",
            message="no Megatron (latest_checkpointed_iteration.txt / iter_*), DeepSpeed (global_step*) or HF (config.json + weights) layout found",
            fix="point --load / --hf-checkpoint / model.path at the checkpoint folder itself",
        ))
    return report
