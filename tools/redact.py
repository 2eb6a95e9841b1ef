"""Secrets out of every output: one explicit list of what is a secret, applied to text and to JSON-like values.

    from grpo_debug.tools.redact import redact, redact_mapping, holds_secret
    redact("export HF_TOKEN=hf_abc...  ray://me:pw@head:10001")  # 'export HF_TOKEN=***  ray://me:***@head:10001'

What is redacted (each replaced by ``***``, the prefix of a known token kept: ``hf_***``):

- **named values**: a variable or key whose name ends with one of :data:`SECRET_WORDS` (TOKEN, KEY, SECRET,
  PASS, PASSWD, PASSWORD, AUTH, CRED, CREDENTIALS, COOKIE, SESSION, PRIVATE, CERT, ...), in the forms
  ``NAME=value``, ``export NAME=value``, ``name: value``, ``"name": "value"``, ``--name value`` and
  ``--name=value``. Names are split into words at ``_ - . /`` and camelCase, and the **last** word decides
  (a trailing VALUE/B64/BASE64/RAW is skipped): ``HF_TOKEN``, ``wandb_api_key``, ``authToken``,
  ``NCCL_IB_PASS`` are secrets; ``max_tokens``, ``tokenizer``, ``num_key_value_heads``, ``kv_cache``,
  ``session_len``, ``pass@k`` are not. Words that name a config slot rather than a credential are kept by the
  word before them (:data:`NOT_SECRET_BEFORE`: OpenRLHF's ``input_key``, ``eos_token``, ``forward_pass``).
  Values that cannot be a secret stay: booleans, null, floats, ``$VAR`` / ``${VAR}`` references, placeholders
  (``***``, ``<redacted>``, ``<your-token>``). A name that is only a weak word (``key``, ``session``,
  ``pass``, ``auth``, ``private``, ``cert``, ``cookie``, ``cred``) redacts only a value that looks like a
  credential (8+ characters mixing letters and digits, or 20+, not a path);
- **URL userinfo**: ``scheme://user:password@host`` -> ``scheme://user:***@host`` (ray, https, redis, postgres...);
- **known token prefixes**: ``hf_``, ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``, ``github_pat_``, ``sk-``,
  ``sk-ant-``, ``xoxb-``/``xoxp-``, ``AKIA``/``ASIA`` AWS key ids, ``glpat-``, ``AIza`` Google keys, ``npm_``,
  ``pypi-``, JWTs (``eyJ...``), ``Bearer``/``Basic`` credentials, ``wandb login KEY`` and ``.netrc`` passwords;
- **key material**: ``-----BEGIN ... PRIVATE KEY-----`` blocks (to their END line, or to the end of the text when
  cut), the body of ``ssh-rsa``/``ssh-ed25519``/``ecdsa-...`` keys, OpenSSH key bytes (``b3BlbnNzaC1rZXktdjE``)
  and lines that are nothing but 60+ characters of mixed-case base64 (a line out of a key file).

What survives (tested): git commit SHAs (40 hex alone: ``commit 0548200...``, ``git_sha: <40 hex>``),
checkpoint hashes (``sha256:<64 hex>``), ``global_step_100`` and config keys that merely contain the letters.
"""
from __future__ import annotations

import re
from typing import Any

MARK = "***"

#: The last word of a name that makes its value a secret.
SECRET_WORDS = frozenset({
    "TOKEN", "KEY", "SECRET", "PASS", "PASSWD", "PASSWORD", "PASSPHRASE", "AUTH", "AUTHORIZATION", "CRED",
    "CREDENTIAL", "CREDENTIALS", "COOKIE", "SESSION", "PRIVATE", "CERT", "APIKEY", "SECRETS"})
#: One-word names ending with these are secrets too (``apikey``, ``authtoken``, ``dbpassword``).
SECRET_SUFFIXES = ("PASSWORD", "PASSWD", "SECRET", "APIKEY", "AUTHTOKEN", "ACCESSTOKEN", "SECRETKEY", "PRIVATEKEY")
#: Weak words: alone (``key: ...``) they redact only a value that looks like a credential.
WEAK_WORDS = frozenset({"KEY", "PASS", "AUTH", "SESSION", "PRIVATE", "CERT", "COOKIE", "CRED"})
#: Words after the secret word that do not change what the value is (``SECRET_VALUE``, ``KEY_B64``).
_TRAILING = frozenset({"VALUE", "B64", "BASE64", "RAW"})
#: Secret words that name a config slot when this word comes before them (``input_key``, ``eos_token``).
NOT_SECRET_BEFORE = {
    "KEY": frozenset({"INPUT", "OUTPUT", "LABEL", "PROMPT", "RESPONSE", "CHOSEN", "REJECTED", "REWARD", "SORT",
                      "PRIMARY", "FOREIGN", "METRIC", "MONITOR", "DICT", "CACHE", "GROUP", "DATA", "DATASET", "TEXT",
                      "IMAGE", "IMAGES", "MESSAGE", "MESSAGES", "CONVERSATION", "COLUMN", "FIELD", "HASH", "MAP",
                      "LOOKUP", "PARTITION", "SHARD", "INDEX", "SEED", "RNG", "PRNG", "RANDOM", "QUERY", "VALUE",
                      "SAMPLE", "TARGET", "ANSWER", "SOLUTION", "CONTEXT", "SYSTEM", "TOOL", "TOOLS", "LOSS",
                      "STATE", "CONFIG", "REF", "TRAJECTORY", "ROLE", "CONTENT", "SOURCE", "ID", "UID", "GT"}),
    "TOKEN": frozenset({"PAD", "EOS", "BOS", "UNK", "SEP", "CLS", "MASK", "STOP", "SPECIAL", "START", "END",
                        "IMAGE", "VIDEO", "AUDIO", "VISION", "THINK", "EOT", "IM", "ADDITIONAL", "CHAT",
                        "PLACEHOLDER", "FIRST", "LAST", "MAX", "MIN", "NUM", "TOTAL", "PER", "NEW", "PROMPT",
                        "RESPONSE", "GENERATION", "INPUT", "OUTPUT", "NEXT", "DECODER", "ASSISTANT", "USER",
                        "TOOL", "SYSTEM", "BOUNDARY", "REWARD", "TEXT", "CHAR", "WORD", "SUB"}),
    "PASS": frozenset({"FORWARD", "BACKWARD", "FIRST", "SECOND", "SINGLE", "MULTI", "TWO", "ONE", "EVAL", "TEST",
                       "COMPILE", "GRAPH", "FUSED", "FULL", "ONLINE", "OFFLINE", "BY", "NO", "CHECK", "DRY"}),
    "SESSION": frozenset({"RAY", "TRAINING", "TRAIN", "EVAL", "CHAT", "INFERENCE", "PROFILE", "PROFILER"}),
    "PRIVATE": frozenset({"HUB", "REPO", "MAKE", "IS"}),
}

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_BOOLISH = frozenset({"", "true", "false", "yes", "no", "on", "off", "null", "none", "nil", "~", "''", '""',
                      "unset", "redacted", "<redacted>", "[redacted]", "(redacted)", "hidden", "<hidden>"})
#: Values that name where a secret comes from, not the secret (``$VAR``, ``os.environ["X"]``).
_REFERENCES = ("$", "os.environ", "os.getenv", "getenv(", "environ[", "environ.get(", "secrets.", "vars.")
# anchored and possessive: linear under search too (tests/test_security.py checks every regex on hostile lines)
_FLOAT = re.compile(r"\A[-+]?(?:\d++(?:\.\d*+(?:[eE][-+]?\d++)?|[eE][-+]?\d++)|\.\d++(?:[eE][-+]?\d++)?)\Z")


def _words(name: str) -> list[str]:
    return [w.upper() for w in _SPLIT.split(_CAMEL.sub("_", name)) if w]


def secret_name(name: str) -> str | None:
    """``"strong"`` when a value named ``name`` is a secret, ``"weak"`` when the name is a weak word alone (its
    value is a secret only if it looks like one), None when it is not a secret's name (module doc)."""
    words = _words(name)
    while len(words) > 1 and words[-1] in _TRAILING:
        words.pop()
    if not words:
        return None
    last = words[-1]
    if last not in SECRET_WORDS:
        return "strong" if last.endswith(SECRET_SUFFIXES) else None
    if len(words) > 1 and words[-2] in NOT_SECRET_BEFORE.get(last, ()):
        return None
    return "weak" if len(words) == 1 and last in WEAK_WORDS else "strong"


def _unquote(v: str) -> str:
    return v[1:-1] if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'" else v


def _looks_like_credential(v: str) -> bool:
    if " " in v or v.startswith(("/", "./", "../", "~")):
        return False
    has_alpha, has_digit = any(c.isalpha() for c in v), any(c.isdigit() for c in v)
    return len(v) >= 20 or (len(v) >= 8 and has_alpha and has_digit)


def keep_value(value: str, strength: str = "strong") -> bool:
    """Whether a value under a secret's name can stay as it is: it cannot be a secret (a boolean, null, a float,
    a ``$VAR`` reference, a placeholder or an already redacted value), or, under a weak name, does not look
    like a credential."""
    v = _unquote(value.strip()).strip()
    if v.lower() in _BOOLISH or MARK in v or (len(v) >= 3 and set(v) <= {"*", "x", "X", "."}) or _FLOAT.fullmatch(v):
        return True
    if v.startswith(_REFERENCES) or (v.startswith("<") and v.endswith(">") and len(v) <= 40 and " " not in v):
        return True  # $VAR, ${VAR}, ${{ secrets.X }}, ${oc.env:VAR}; <your-token>
    return strength == "weak" and not _looks_like_credential(v)


# ---- patterns ------------------------------------------------------------------------------------------

_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]*?)PRIVATE KEY( BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*?PRIVATE KEY"
                  r"(?: BLOCK)?-----|\Z)", re.S)
_SSH_PUB = re.compile(r"\b(ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-[a-z0-9]+|sk-ssh-ed25519@openssh\.com)"
                      r"([ \t]+)AAAA[0-9A-Za-z+/]+=*")
_OPENSSH = re.compile(r"b3BlbnNzaC1rZXktdjE[0-9A-Za-z+/=]*")
_B64_LINE = re.compile(r"^([ \t]*)([A-Za-z0-9+/]{60,}={0,2})([ \t]*)$", re.M)
_URL_USERINFO = re.compile(r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]{0,30}://)([^\s:/@'\"<>]*):([^\s@/'\"<>]+)@")
_PREFIXES = [  # (pattern, literals one of which it needs)
    (re.compile(r"(?<![A-Za-z0-9_\-])(sk-ant-)[A-Za-z0-9_\-]{20,}"), ("sk-ant-",)),
    (re.compile(r"(?<![A-Za-z0-9_\-])(sk-(?:proj-|svcacct-|admin-)?)[A-Za-z0-9_\-]{20,}"), ("sk-",)),
    (re.compile(r"(?<![A-Za-z0-9_])(hf_)[A-Za-z0-9]{30,}"), ("hf_",)),
    (re.compile(r"(?<![A-Za-z0-9_])(gh[pousr]_)[A-Za-z0-9]{30,}"), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (re.compile(r"(?<![A-Za-z0-9_])(github_pat_)[A-Za-z0-9_]{30,}"), ("github_pat_",)),
    (re.compile(r"(?<![A-Za-z0-9_\-])(xox[abposr]-)[A-Za-z0-9\-]{10,}"), ("xox",)),
    (re.compile(r"(?<![A-Za-z0-9])((?:AKIA|ASIA))[0-9A-Z]{16}(?![0-9A-Za-z])"), ("AKIA", "ASIA")),
    (re.compile(r"(?<![A-Za-z0-9_\-])(glpat-)[A-Za-z0-9_\-]{20,}"), ("glpat-",)),
    (re.compile(r"(?<![A-Za-z0-9_\-])(AIza)[0-9A-Za-z_\-]{35}"), ("AIza",)),
    (re.compile(r"(?<![A-Za-z0-9_])(npm_)[A-Za-z0-9]{36}"), ("npm_",)),
    (re.compile(r"(?<![A-Za-z0-9_\-])(pypi-)AgE[A-Za-z0-9_\-]{20,}"), ("pypi-",)),
    (re.compile(r"(?<![A-Za-z0-9_\-])()eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), ("eyJ",)),
    (re.compile(r"\b((?:Bearer|Basic|Token)[ \t]+)(?!\*)[A-Za-z0-9._~+/\-]{8,}=*"), ("Bearer", "Basic", "Token")),
    (re.compile(r"\b(wandb[ \t]+login[ \t]+(?:--?[\w-]+[ \t]+)*)(?![-*$<])\S{20,}"), ("wandb",)),
    (re.compile(r"\b(machine[ \t]+\S+[ \t]+login[ \t]+\S+[ \t]+password[ \t]+)(?!\*)\S+"), ("machine",)),
]
_NAME = r"[A-Za-z_][\w.\-]*"
_QVAL = r"\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'"
#: NAME=value (export NAME=value, --name=value, key = "value"); not '==' (a comparison)
_ASSIGN = re.compile(rf"(?<![\w.\-/])(?P<name>-{{0,2}}{_NAME})(?P<sep>[ \t]*=(?!=)[ \t]*)"
                     rf"(?P<val>{_QVAL}|[^\s,;&|)}}\]\"'`]+)")
#: name: value, "name": "value", 'name': value (a YAML, JSON or Python dict entry; a log's key: value)
_COLON = re.compile(rf"(?<![\w.\-/])(?P<q>[\"']?)(?P<name>{_NAME})(?P=q)(?P<sep>[ \t]*:(?!//)[ \t]*)"
                    rf"(?P<val>{_QVAL}|[^\s,}}\]\"'#](?:(?![ \t]+{_NAME}[ \t]*[:=][ \t])[^\n,}}\]#])*?"
                    r"(?=[ \t]*(?:[,}\]#\n]|$)|[ \t]+[A-Za-z_][\w.\-]*[ \t]*[:=][ \t]))", re.M)
#: --name value (a command-line flag and its argument)
_FLAG = re.compile(rf"(?<![\w\-])(?P<name>--?[A-Za-z][\w.\-]*)(?P<sep>[ \t]+)(?P<val>{_QVAL}|(?![-\\])[^\s\"'`;|&]+)")


#: Anything any pattern below could start from (one scan: most strings of an answer hold none of these).
_ANY = re.compile(r"PRIVATE KEY|ssh-|ecdsa-|b3BlbnNzaC1|://|hf_|gh[pousr]_|github_pat_|sk-|xox|AKIA|ASIA|glpat-|"
                  r"AIza|npm_|pypi-|eyJ|Bearer|Basic|wandb|machine|TOKEN|KEY|SECRET|PASS|AUTH|CRED|COOKIE|"
                  r"SESSION|PRIVATE|CERT|[A-Za-z0-9+/]{60}", re.I)
#: A secret word (the named forms are looked for only on the lines holding one: other lines cost one scan).
_WORD = re.compile(r"TOKEN|KEY|SECRET|PASS|AUTH|CRED|COOKIE|SESSION|PRIVATE|CERT", re.I)


def _masked(val: str) -> str:
    return val[0] + MARK + val[0] if len(val) >= 2 and val[0] == val[-1] and val[0] in "\"'" else MARK


def _sub_named(pat: re.Pattern, text: str) -> str:
    """Each ``name <sep> value`` match of ``pat`` whose name is a secret's gets its value masked. A match of
    another name consumes only its name and separator, so the scan goes on inside its value (``step: 1
    token: abc`` on one line)."""
    out, pos, last = [], 0, 0
    while True:
        m = pat.search(text, pos)
        if m is None:
            break
        strength = secret_name(m.group("name").lstrip("-"))
        val = m.group("val")
        if strength is None or keep_value(val, strength):
            pos = m.end("sep") if m.end("sep") > m.start() else m.end()
            continue
        out += [text[last:m.start("val")], _masked(val)]
        pos = last = m.end()
    return "".join(out) + text[last:] if out else text


def _b64_line(m: re.Match) -> str:
    s = m.group(2)
    if re.fullmatch(r"[0-9a-fA-F]+", s) or not (re.search(r"[a-z]", s) and re.search(r"[A-Z]", s)
                                               and re.search(r"[0-9+/]", s)):
        return m.group(0)
    return m.group(1) + MARK + m.group(3)


def redact(text: str) -> str:
    """``text`` with every secret of the module doc replaced by ``***``; anything else unchanged (same lines:
    a key block becomes one line ``-----BEGIN ... PRIVATE KEY----- *** -----END ...-----`` only when the whole
    block was on one line, else its lines are kept as ``***``). Non-str input is returned as it is."""
    if not isinstance(text, str) or not _ANY.search(text):
        return text
    if "PRIVATE KEY" in text:
        text = _PEM.sub(_pem_block, text)
    text = _SSH_PUB.sub(lambda m: m.group(1) + m.group(2) + MARK, text)
    text = _OPENSSH.sub(MARK, text)
    text = _B64_LINE.sub(_b64_line, text)
    if "://" in text:
        text = _URL_USERINFO.sub(lambda m: m.group(0) if MARK in m.group(3) else m.group(1) + m.group(2) + ":" + MARK + "@",
                                 text)
    for pat, needs in _PREFIXES:
        if any(x in text for x in needs):
            text = pat.sub(lambda m: m.group(1) + MARK, text)
    return _named_lines(text)


def _named_lines(text: str) -> str:
    """``text`` with the named values of every line that holds a secret word masked (other lines untouched)."""
    parts, last = [], 0
    for m in _WORD.finditer(text):
        if m.start() < last:
            continue  # a second word on a line already done
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        end = len(text) if end < 0 else end
        parts += [text[last:start], _named_line(text[start:end])]
        last = end
    return "".join(parts) + text[last:] if parts else text


def _named_line(line: str) -> str:
    """One line that holds a secret word: its named values masked (the three forms of the module doc)."""
    if "=" in line:
        line = _sub_named(_ASSIGN, line)
    if ":" in line:
        line = _sub_named(_COLON, line)
    if "-" in line:
        line = _sub_named(_FLAG, line)
    return line


def _pem_block(m: re.Match) -> str:
    """A private key block: its BEGIN and END lines kept, every line between them ``***`` (line count kept)."""
    lines = m.group(0).split("\n")
    if len(lines) == 1:
        head = m.group(0)[: m.group(0).index("-----", 5) + 5]
        tail = m.group(0)[len(head):]
        end = re.search(r"-----END .*-----$", tail)
        return head + " " + MARK + (" " + end.group(0) if end else "")
    body = [MARK if ln.strip() and not ln.lstrip().startswith("-----") else ln for ln in lines[1:]]
    return "\n".join([lines[0], *body])


def holds_secret(line: str) -> bool:
    """Whether ``line`` holds anything :func:`redact` would hide (an edit never rewrites such a line)."""
    return isinstance(line, str) and redact(line) != line


def _strong(name: str) -> str | None:
    """Only strong secret names count in a mapping: a field named ``key`` or ``session`` alone names a config
    key or a count in this product's answers, not a credential (its string still goes through redact)."""
    return "strong" if secret_name(name) == "strong" else None


def redact_mapping(value: Any, _secret: str | None = None, _depth: int = 0) -> Any:
    """A JSON-like value (dict, list, str, numbers) with its secrets redacted, as a new value: a string under a
    secret's name (``{"HF_TOKEN": "..."}``, ``{"probe.env.NCCL_IB_PASS": "..."}``), or beside a ``key``/``name``
    field that names a secret (``{"key": "env.HF_TOKEN", "a": "...", "b": "..."}``), becomes ``***`` unless
    :func:`keep_value`; every other string goes through :func:`redact`. Weak words alone do not count as names
    here (``{"key": "lr"}``). Keys, numbers, booleans and None are
    kept; nesting deeper than 64 levels is returned unchanged below that depth."""
    if _depth > 64:
        return value
    if isinstance(value, str):
        if _secret is not None and not keep_value(value, _secret):
            return MARK
        return redact(value)
    if isinstance(value, dict):
        named = next((value[f] for f in ("key", "name") if isinstance(value.get(f), str)), None)
        row = _strong(named) if named is not None else None  # {key: HF_TOKEN, a: ..., b: ...}: a row of one secret
        return {k: redact_mapping(v, (row if k not in ("key", "name") else None) or
                                  (_strong(k) if isinstance(k, str) else None), _depth + 1)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_mapping(v, _secret, _depth + 1) for v in value)
    return value
