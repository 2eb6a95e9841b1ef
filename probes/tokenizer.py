"""Stop strings -> stop token ids, from a local ``tokenizer.json`` (the ``tokenizers`` library; never downloads).

Why (Relax debugging guide, "Stop Strings Trigger IMA Under Agentic High Concurrency"): SGLang matches stop
*strings* in the detokenizer subprocess by per-token incremental decode plus substring match; with 100+
concurrent agent sessions that work starves its heartbeat and the run dies with "illegal memory access".
``stop_token_ids`` are matched on the GPU against generated ids and bypass the detokenizer.

- Single-token terminators (``</tool_call>``, ``<|im_end|>``): look up their ids and pass them as
  stop_token_ids (slime ``--rollout-stop-token-ids``; OpenAI-compatible ``extra_body={"stop_token_ids": [...]}``).
- Multi-token sequences (``</answer>`` = several ids) cannot be stop_token_ids: terminate on the chat-template
  turn end (``<|im_end|>``) and extract the answer with a regex after generation.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from grpo_debug.probes.base import Confined, RefusedFile, Unknown, child_argv, probe
from grpo_debug.probes.rlimits import TOKENIZER_CPU_S, TOKENIZER_MEM_MB, died_of, limit_self

# Chat-template turn terminators, most common first (Qwen/ChatML, Llama 3, Gemma, Phi-3, DeepSeek, generic).
TURN_TERMINATORS = ["<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|end▁of▁sentence|>", "<|endoftext|>"]


class StopStringResult(BaseModel):
    text: str
    ids: list[int] = Field(description="encode(text, add_special_tokens=False).ids, the string on its own.")
    tokens: list[str] = Field(default_factory=list)
    single_token: bool
    token_id: int | None = Field(None, description="The id when it is one token.")
    added_token: bool = Field(False, description="An added/special token: the tokenizer never splits it.")
    advice: str


class StopTokenReport(BaseModel):
    tokenizer_file: str
    results: list[StopStringResult]
    stop_token_ids: list[int] = Field(description="Ids of the stop strings that are single tokens.")
    multi_token: list[str] = Field(default_factory=list, description="Stop strings that cannot be stop_token_ids.")
    eos_token: str | None = None
    eos_token_ids: list[int] = Field(default_factory=list)
    eos_source: list[str] = Field(default_factory=list, description="Files the eos facts came from.")
    turn_terminator: str | None = Field(None, description="Chat-template turn end found in the vocabulary.")
    turn_terminator_id: int | None = None
    recommended_stop_token_ids: list[int] = Field(description="stop_token_ids + eos ids (+ turn end when needed).")
    slime_flag: str = Field(description="Ready to paste, e.g. '--rollout-stop-token-ids 151645 151643'.")
    extra_body: dict[str, list[int]] = Field(description='OpenAI client extra_body, {"stop_token_ids": [...]}.')
    advice: list[str] = Field(default_factory=list)


MAX_TOKENIZER_BYTES = 64 * 2**20  # tokenizer.json of the largest vocabularies is ~30 MB
MAX_SIDE_JSON_BYTES = 4 * 2**20   # tokenizer_config.json / generation_config.json / config.json
CHILD_TIMEOUT_S = 10.0  # wall clock; the child also runs under probes/rlimits.py's memory and CPU limits


def _load_json(fs: Confined, p: Path) -> dict[str, Any] | None:
    data, _ = fs.json(p, MAX_SIDE_JSON_BYTES)
    return data if isinstance(data, dict) else None


def _token_text(v: Any) -> str | None:
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and isinstance(v.get("content"), str):
        return v["content"]
    return None


def _ids(v: Any) -> list[int]:
    if isinstance(v, bool):
        return []
    if isinstance(v, int):
        return [v]
    if isinstance(v, list):
        return [x for x in v if isinstance(x, int) and not isinstance(x, bool)]
    return []


class _Tok:
    """What the child answered: encodings of the stop strings, ids of looked-up tokens, added tokens."""

    def __init__(self, d: dict[str, Any]) -> None:
        self.enc = {e["text"]: (e["ids"], e["tokens"]) for e in d["encodings"]}
        self.ids = d["ids"]
        self.added = set(d["added"])

    def token_to_id(self, t: str) -> int | None:
        return self.ids.get(t)


def _child_main() -> int:
    """``python -m grpo_debug.probes.tokenizer``: the tokenizers library runs here, never in the caller. A native
    panic (PanicException, a BaseException) or an abort kills only this process. Reads JSON on stdin
    ({tokenizer: the tokenizer.json text, stop: [...], lookup: [...]}) and prints JSON."""
    limit_self(*_child_limits(sys.argv[1:]))  # first: a normalizer that multiplies its input ends here
    try:
        req = json.loads(sys.stdin.buffer.read().decode("utf-8"))
        from tokenizers import Tokenizer

        tok = Tokenizer.from_str(req["tokenizer"])
        try:
            added = sorted({t.content for t in tok.get_added_tokens_decoder().values()})
        except Exception:  # noqa: BLE001 - older tokenizers without get_added_tokens_decoder
            data = json.loads(req["tokenizer"])
            added = sorted({t.get("content") for t in data.get("added_tokens", [])
                            if isinstance(t, dict) and isinstance(t.get("content"), str)})
        encs = []
        for s in req["stop"]:
            e = tok.encode(s, add_special_tokens=False)
            encs.append({"text": s, "ids": list(e.ids), "tokens": list(e.tokens)})
        ids = {t: tok.token_to_id(t) for t in dict.fromkeys(req["stop"] + req["lookup"])}
        out = {"encodings": encs, "ids": {k: v for k, v in ids.items() if v is not None}, "added": added}
    except BaseException as e:  # noqa: BLE001 - PanicException from Rust is a BaseException; report it as data
        out = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    sys.stdout.write(json.dumps(out))
    sys.stdout.flush()
    return 0


def _child_limits(argv: list[str]) -> tuple[int, int]:
    """(memory MB, CPU s) from the child's ``--mem-mb N --cpu-s N`` arguments (defaults: probes/rlimits.py)."""
    vals = dict(zip(argv[::2], argv[1::2]))
    try:
        return int(vals.get("--mem-mb", TOKENIZER_MEM_MB)), int(vals.get("--cpu-s", TOKENIZER_CPU_S))
    except ValueError:
        return TOKENIZER_MEM_MB, TOKENIZER_CPU_S


def _run_child(tok_text: str, stop: list[str], lookup: list[str], timeout: float = CHILD_TIMEOUT_S,
               mem_mb: int = TOKENIZER_MEM_MB, cpu_s: int = TOKENIZER_CPU_S) -> dict[str, Any]:
    """The child's answer, or {"error": why} when it failed, died (a native crash, its ``mem_mb`` memory or
    ``cpu_s`` CPU limit) or ran past ``timeout`` seconds."""
    req = json.dumps({"tokenizer": tok_text, "stop": stop, "lookup": lookup}).encode("utf-8")
    argv = child_argv("grpo_debug.probes.tokenizer", "--mem-mb", str(mem_mb), "--cpu-s", str(cpu_s))
    try:
        p = subprocess.run(argv, input=req, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s"}
    except OSError as e:
        return {"error": f"could not start the tokenizer child: {e}"}
    try:
        return json.loads(p.stdout.decode("utf-8"))
    except ValueError:
        last = [ln for ln in p.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        why = next((ln for ln in last if "panicked" in ln or "Error" in ln or "allocation" in ln),
                   last[-1] if last else "")
        return {"error": f"the tokenizer process died ({died_of(p.returncode, mem_mb, cpu_s)})"
                         f"{': ' + why[:200] if why else ''}"}


def _classify_stops(tok: "_Tok", stop_strings: list[str]) -> tuple[list[StopStringResult], list[int], list[str]]:
    """Each stop string as one token (its id) or several (not usable as a stop_token_id), with advice."""
    added = tok.added
    results: list[StopStringResult] = []
    single_ids: list[int] = []
    multi: list[str] = []
    for s in stop_strings:
        ids, toks = tok.enc[s]
        direct = tok.token_to_id(s)
        is_added = s in added
        if direct is not None and (is_added or ids == [direct] or not ids):
            single, tid = True, direct
        elif len(ids) == 1:
            single, tid = True, ids[0]
        else:
            single, tid = False, None
        if single:
            single_ids.append(tid)
            if is_added:
                advice = (f"{s!r} is one added token (id {tid}): pass it in stop_token_ids; GPU-side match, "
                          "no detokenizer work")
            else:
                advice = (f"{s!r} encodes to one ordinary vocabulary token (id {tid}) on its own; stop_token_ids "
                          f"catches that id only - the model can also spell {s!r} with other tokens mid-text "
                          "(check by tokenizing a sample response), so keep a regex check after generation")
        else:
            multi.append(s)
            advice = (f"{s!r} is {len(ids)} tokens {ids}: it cannot be a stop_token_id (Relax guide). Stop on the "
                      "chat-template turn terminator (e.g. <|im_end|>) and extract the answer with a regex after "
                      "generation; keep it as a stop string only at low concurrency")
        results.append(StopStringResult(text=s, ids=ids, tokens=toks, single_token=single, token_id=tid,
                                        added_token=is_added, advice=advice))
    return results, single_ids, multi


def _eos_ids(fs: Confined, folder: Path, tcfg: dict | None, eos_token: str | None, tok: "_Tok") -> tuple[list[int], list[str]]:
    """The eos ids from tokenizer_config.json / generation_config.json / config.json, and where each came from."""
    eos_ids, eos_src = [], []
    if tcfg is not None:
        if eos_token:
            eos_src.append("tokenizer_config.json")
            tid = tok.token_to_id(eos_token)
            if tid is not None:
                eos_ids.append(tid)
    for name in ("generation_config.json", "config.json"):
        cfg = _load_json(fs, folder / name)
        if cfg is not None and _ids(cfg.get("eos_token_id")):
            eos_src.append(name)
            eos_ids += _ids(cfg.get("eos_token_id"))
            if name == "generation_config.json":
                break  # generation_config is what vLLM/SGLang use; config.json is the fallback
    eos_ids = list(dict.fromkeys(eos_ids))
    return eos_ids, eos_src


@probe
def stop_token_ids(tokenizer_path: str | Path, stop_strings: list[str]) -> StopTokenReport | Unknown:
    """Map each stop string to token ids with the local tokenizer at ``tokenizer_path`` (folder or tokenizer.json).

    Files are read only inside the tokenizer's folder (symlinks confined, regular files only, byte caps); the
    ``tokenizers`` library runs in a child process, so a native panic on a hostile tokenizer.json is a result."""
    if importlib.util.find_spec("tokenizers") is None:
        return Unknown(reason="the 'tokenizers' library is not installed (pip install tokenizers)")

    p = Path(tokenizer_path).expanduser()
    if p.is_dir():
        folder, tok_file = p, p / "tokenizer.json"
    else:
        tok_file = Path(os.path.realpath(p))  # the file the user named (links resolved); its folder is the scope
        folder = tok_file.parent
    fs = Confined(folder)
    kind = fs.kind(tok_file)
    if kind != "file":
        if kind == "refused":
            return Unknown(reason=f"{tok_file} is {fs.refused.get('tokenizer.json') or next(iter(fs.refused.values()))}")
        if fs.is_file(folder / "tokenizer.model"):
            return Unknown(reason=(f"{folder} has only tokenizer.model (sentencepiece); the tokenizers library needs "
                                   "tokenizer.json: AutoTokenizer.from_pretrained(path).save_pretrained(path) writes it"))
        return Unknown(reason=f"no tokenizer.json at {tok_file}")
    try:
        tok_text = fs.read(tok_file, MAX_TOKENIZER_BYTES).decode("utf-8", errors="replace")
    except (OSError, RefusedFile) as e:
        return Unknown(reason=f"{tok_file}: {getattr(e, 'strerror', None) or e}")

    tcfg = _load_json(fs, folder / "tokenizer_config.json")
    eos_token = _token_text(tcfg.get("eos_token")) if tcfg is not None else None
    answer = _run_child(tok_text, list(stop_strings), ([eos_token] if eos_token else []) + TURN_TERMINATORS)
    if "error" in answer:
        return Unknown(reason=(f"the tokenizers library failed on {tok_file}: {answer['error']}. The tokenizer.json "
                               "may be corrupt or its normalizer / pre-tokenizer pathological; re-export it with "
                               "AutoTokenizer.from_pretrained(path).save_pretrained(path)"))
    tok = _Tok(answer)

    results, single_ids, multi = _classify_stops(tok, stop_strings)
    eos_ids, eos_src = _eos_ids(fs, folder, tcfg, eos_token, tok)

    turn, turn_id = None, None
    for t in TURN_TERMINATORS:
        i = tok.token_to_id(t)
        if i is not None:
            turn, turn_id = t, i
            break

    rec = list(dict.fromkeys(single_ids))
    advice: list[str] = []
    if multi:
        if turn_id is not None:
            rec.append(turn_id)
            advice.append(f"multi-token stop strings {multi}: stop on the turn terminator {turn} (id {turn_id}) "
                          "instead and extract the answer by regex after generation")
        else:
            advice.append(f"multi-token stop strings {multi} and no known turn terminator in the vocabulary: "
                          "stop on eos and extract the answer by regex after generation")
    if eos_ids:
        missing_eos = [e for e in eos_ids if e not in rec]
        rec += missing_eos
        advice.append(f"include eos id(s) {eos_ids} ({eos_token or 'from ' + ', '.join(eos_src)}): engines stop on "
                      "generation_config eos by default, but an explicit stop_token_ids list keeps it when "
                      "ignore_eos or a custom sampling-params dict is in play")
    rec = list(dict.fromkeys(rec))
    if rec:
        advice.append("prefer stop_token_ids over stop strings: matched on the GPU, bypass SGLang's detokenizer "
                      "(stop strings under 100+ concurrent agent sessions can starve its heartbeat -> illegal memory access)")
    advice += [f"{name}: {why}" for name, why in list(fs.refused.items())[:10]]
    flag = "--rollout-stop-token-ids " + " ".join(map(str, rec)) if rec else ""
    return StopTokenReport(
        tokenizer_file=str(tok_file), results=results, stop_token_ids=list(dict.fromkeys(single_ids)),
        multi_token=multi, eos_token=eos_token, eos_token_ids=eos_ids, eos_source=eos_src,
        turn_terminator=turn, turn_terminator_id=turn_id, recommended_stop_token_ids=rec,
        slime_flag=flag, extra_body={"stop_token_ids": rec}, advice=advice,
    )


if __name__ == "__main__":
    raise SystemExit(_child_main())
