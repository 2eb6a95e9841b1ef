"""The bearer-token policy of the HTTP server: at least 32 characters and at least 128 bits of estimated entropy.

The estimate is deliberately pessimistic about patterns and generous to random text:

- each character costs log2 of the alphabet its character classes span: digits only 10, hex digits of one case
  16, else lower 26 + upper 26 + digits 10 + anything else 33; an alphabet far larger than the characters
  actually used is capped at twice the distinct count (40 random picks of ``a``/``b`` are ~40 bits, not 188);
- a run of 4 or more characters that follow one another in an ordered sequence (``abcd``, ``4321``, ``9abc``
  in hex order, keyboard rows ``qwerty``/``asdf``, ``aaaa``) costs one character plus its length;
- 4 or more characters that repeat an earlier stretch of the token cost a back-reference (where and how long),
  as a compressor would write them.

``openssl rand -hex 32`` (64 hex characters) scores about 256 bits; ``0123456789abcdef`` 16 characters and
about 11 bits; ``0123456789abcdef`` twice (32 characters) about 20 bits.
"""
from __future__ import annotations

import math
import string

MIN_TOKEN_CHARS = 32
MIN_TOKEN_BITS = 128
MAKE_ONE = "`openssl rand -hex 32`"

_SEQUENCES = (
    "0123456789abcdefghijklmnopqrstuvwxyz",
    "`1234567890-=", "qwertyuiop[]\\", "asdfghjkl;'", "zxcvbnm,./",
    "~!@#$%^&*()_+", "qwertzuiop", "azertyuiop", "qsdfghjklm", "wxcvbn",
)
_RUN = 4  # shortest sequence run or repeat that is priced as a pattern


def alphabet_size(token: str) -> int:
    """The size of the alphabet the token's character classes span (see the module docstring); 0 for ''."""
    if not token:
        return 0
    chars = set(token)
    if chars <= set(string.digits):
        size = 10
    elif chars <= set("0123456789abcdef") or chars <= set("0123456789ABCDEF"):
        size = 16
    else:
        size = (26 * any(c in string.ascii_lowercase for c in chars) + 26 * any(c in string.ascii_uppercase for c in chars)
                + 10 * any(c in string.digits for c in chars)
                + 33 * any(c not in string.ascii_letters + string.digits for c in chars))
    return max(2, min(size, 2 * len(chars)))


def _follows(a: str, b: str) -> int:
    """+1 / -1 when ``b`` comes right after / before ``a`` in one ordered sequence, 2 when equal, else 0."""
    if a == b:
        return 2
    a, b = a.lower(), b.lower()
    if abs(ord(a) - ord(b)) == 1:
        return ord(b) - ord(a)
    for seq in _SEQUENCES:
        i, j = seq.find(a), seq.find(b)
        if i >= 0 and j >= 0 and abs(i - j) == 1:
            return j - i
    return 0


def _run_length(token: str, i: int) -> int:
    """How many characters from ``i`` on continue one sequence in one direction (1 when none)."""
    if i + 1 >= len(token):
        return 1
    step = _follows(token[i], token[i + 1])
    if not step:
        return 1
    n = 2
    while i + n < len(token) and _follows(token[i + n - 1], token[i + n]) == step:
        n += 1
    return n


def _repeat_length(token: str, i: int, seen: dict[str, list[int]]) -> int:
    """The longest stretch from ``i`` on that also starts earlier in the token (0 when shorter than _RUN);
    ``seen`` maps each _RUN-character window to where it starts, for windows starting before ``i``."""
    best = 0
    for j in seen.get(token[i:i + _RUN], ())[-64:]:
        n = 0
        while i + n < len(token) and token[j + n] == token[i + n]:
            n += 1
        best = max(best, n)
    return best if best >= _RUN else 0


def estimate_bits(token: str) -> float:
    """Estimated entropy of ``token`` in bits (see the module docstring); 0.0 for ''."""
    per_char = math.log2(alphabet_size(token)) if token else 0.0
    seen: dict[str, list[int]] = {}
    bits, i = 0.0, 0
    while i < len(token):
        rep, run = _repeat_length(token, i, seen), _run_length(token, i)
        if rep and rep >= run:
            bits, step = bits + math.log2(i + 1) + math.log2(rep) + 1, rep
        elif run >= _RUN:
            bits, step = bits + per_char + math.log2(run) + 1, run
        else:
            bits, step = bits + per_char, 1
        for k in range(i, i + step):
            seen.setdefault(token[k:k + _RUN], []).append(k)
        i += step
    return bits


def token_problem(token: str, where: str) -> str | None:
    """Why the bearer token read from ``where`` (``--token-file FILE``, ``$GRPO_DEBUG_TOKEN``) is refused, as a
    message naming ``where`` and how to make a good one (never the token itself); None when it is accepted."""
    if not token:
        return f"{where} is empty; put a random token in it, e.g. {MAKE_ONE}"
    if any(c.isspace() for c in token):
        return f"the token in {where} has spaces in it; use one word, e.g. {MAKE_ONE}"
    if len(token) > 4096:
        return f"the token in {where} is {len(token)} characters (at most 4096); use e.g. {MAKE_ONE}"
    if len(token) < MIN_TOKEN_CHARS:
        return (f"the token in {where} is {len(token)} characters; it must be at least {MIN_TOKEN_CHARS} characters "
                f"with at least {MIN_TOKEN_BITS} bits of entropy, e.g. {MAKE_ONE}")
    bits = estimate_bits(token)
    if bits < MIN_TOKEN_BITS:
        return (f"the token in {where} is easy to guess: about {bits:.0f} bits of entropy (at least {MIN_TOKEN_BITS} "
                f"needed; repeats, sequences and keyboard runs count little); use a random one, e.g. {MAKE_ONE}")
    return None
