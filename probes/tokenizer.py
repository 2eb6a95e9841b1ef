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

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from grpo_debug.probes.base import Unknown, probe

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


def _load_json(p: Path) -> dict[str, Any] | None:
    try:
        if p.is_file() and p.stat().st_size < 16 * 1024 * 1024:
            data = json.loads(p.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None
    return None


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


@probe
def stop_token_ids(tokenizer_path: str | Path, stop_strings: list[str]) -> StopTokenReport | Unknown:
    """Map each stop string to token ids with the local tokenizer at ``tokenizer_path`` (folder or tokenizer.json)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return Unknown(reason="the 'tokenizers' library is not installed (pip install tokenizers)")

    p = Path(tokenizer_path).expanduser()
    if p.is_dir():
        folder, tok_file = p, p / "tokenizer.json"
    else:
        folder, tok_file = p.parent, p
    if not tok_file.is_file():
        if (folder / "tokenizer.model").is_file():
            return Unknown(reason=(f"{folder} has only tokenizer.model (sentencepiece); the tokenizers library needs "
                                   "tokenizer.json: AutoTokenizer.from_pretrained(path).save_pretrained(path) writes it"))
        return Unknown(reason=f"no tokenizer.json at {tok_file}")
    tok = Tokenizer.from_file(str(tok_file))

    added: set[str] = set()
    try:
        added = {t.content for t in tok.get_added_tokens_decoder().values()}
    except Exception:  # noqa: BLE001 - older tokenizers without get_added_tokens_decoder
        data = _load_json(tok_file) or {}
        added = {t.get("content") for t in data.get("added_tokens", []) if isinstance(t, dict)}

    results: list[StopStringResult] = []
    single_ids: list[int] = []
    multi: list[str] = []
    for s in stop_strings:
        enc = tok.encode(s, add_special_tokens=False)
        ids, toks = list(enc.ids), list(enc.tokens)
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

    # eos from tokenizer_config.json / generation_config.json / config.json
    eos_token, eos_ids, eos_src = None, [], []
    tcfg = _load_json(folder / "tokenizer_config.json")
    if tcfg is not None:
        eos_token = _token_text(tcfg.get("eos_token"))
        if eos_token:
            eos_src.append("tokenizer_config.json")
            tid = tok.token_to_id(eos_token)
            if tid is not None:
                eos_ids.append(tid)
    for name in ("generation_config.json", "config.json"):
        cfg = _load_json(folder / name)
        if cfg is not None and _ids(cfg.get("eos_token_id")):
            eos_src.append(name)
            eos_ids += _ids(cfg.get("eos_token_id"))
            if name == "generation_config.json":
                break  # generation_config is what vLLM/SGLang use; config.json is the fallback
    eos_ids = list(dict.fromkeys(eos_ids))

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
    flag = "--rollout-stop-token-ids " + " ".join(map(str, rec)) if rec else ""
    return StopTokenReport(
        tokenizer_file=str(tok_file), results=results, stop_token_ids=list(dict.fromkeys(single_ids)),
        multi_token=multi, eos_token=eos_token, eos_token_ids=eos_ids, eos_source=eos_src,
        turn_terminator=turn, turn_terminator_id=turn_id, recommended_stop_token_ids=rec,
        slime_flag=flag, extra_body={"stop_token_ids": rec}, advice=advice,
    )
