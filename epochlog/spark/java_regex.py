"""subscribePattern's Java regex, translated to Python's `re`: sans-I/O.

Spark's Kafka source compiles subscribePattern with `java.util.regex.Pattern` and keeps the
topics where the pattern is found anywhere in the name (`findFirstIn`, i.e. `Matcher.find`), so
`orders` matches `orders-eu`; here that is `re.search` on the translated pattern.

The two dialects agree on most syntax. Where they differ, the construct is translated when the
translation is exact, else refused with a `JavaRegexError` naming it, so a pattern never
silently selects other topics than it would on Spark:

- translated: `\\Q...\\E` (quoted text), `\\z` (end of input), `\\Z` (end, before a final line
  break), `\\e` (escape), `(?<name>...)` and `\\k<name>` (named groups);
- `\\d \\w \\s \\b` are ASCII, as Java's defaults: the whole pattern is compiled with re.ASCII,
  which also makes `(?i)` ASCII-only, as Java's CASE_INSENSITIVE without UNICODE_CASE;
- refused: `\\p{..}`/`\\P{..}` classes, `\\h \\H \\v \\V \\R \\X \\G \\N`, `\\c`, octal `\\0`,
  `\\x{..}`, nested character classes and intersections (`[a[b]]`, `[a&&b]`), and inline flags
  other than `i`, `m`, `s`, or anywhere but the very start (Java lets them switch mid-pattern).
"""

from __future__ import annotations

import re

# Escapes that mean the same in both dialects (letters; escaped punctuation is always literal).
_SAME_ESCAPES = set("dDwWsSbBAtnrfa")
_REFUSED_ESCAPES = {
    "p": "Unicode property classes (\\p{..})",
    "P": "Unicode property classes (\\P{..})",
    "h": "\\h (horizontal whitespace)",
    "H": "\\H",
    "v": "\\v (vertical whitespace in Java, a vertical tab in Python)",
    "V": "\\V",
    "R": "\\R (any line break)",
    "X": "\\X (grapheme cluster)",
    "G": "\\G (end of previous match)",
    "N": "\\N{name}",
    "c": "control characters (\\cX)",
    "0": "octal escapes (\\0nn)",
}
_ALLOWED_FLAGS = set("ims")


class JavaRegexError(ValueError):
    """A Java regex construct with no exact Python translation, or a malformed pattern."""


def translate(pattern: str) -> str:
    """The Python `re` pattern that finds what the Java pattern finds."""
    out: list[str] = []
    i = 0
    n = len(pattern)
    in_class = False
    class_start = 0
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise JavaRegexError("the pattern ends with a lone backslash")
            e = pattern[i + 1]
            if e == "Q":
                end = pattern.find("\\E", i + 2)
                quoted = pattern[i + 2 :] if end < 0 else pattern[i + 2 : end]
                out.append(re.escape(quoted))
                i = n if end < 0 else end + 2
                continue
            if e in _REFUSED_ESCAPES:
                raise JavaRegexError(f"{_REFUSED_ESCAPES[e]} is not supported")
            if e == "x":
                if pattern.startswith("{", i + 2):
                    raise JavaRegexError("\\x{...} escapes are not supported; use \\uXXXX")
                out.append(pattern[i : i + 4])
                i += 4
                continue
            if e == "u":
                out.append(pattern[i : i + 6])
                i += 6
                continue
            if e == "k" and not in_class:
                m = re.match(r"\\k<([A-Za-z][A-Za-z0-9]*)>", pattern[i:])
                if m is None:
                    raise JavaRegexError("\\k must be followed by <name>")
                out.append(f"(?P={m.group(1)})")
                i += m.end()
                continue
            if e == "z" and not in_class:
                out.append("\\Z")
            elif e == "Z" and not in_class:
                out.append("(?=\\n?\\Z)")
            elif e == "e":
                out.append("\\x1b")
            elif e.isdigit() and not in_class:
                out.append(pattern[i : i + 2])  # a back reference, as in Python
            elif e.isalnum():
                if e not in _SAME_ESCAPES or (in_class and e in "bBA"):
                    raise JavaRegexError(f"the escape \\{e} is not supported")
                out.append(pattern[i : i + 2])
            else:
                out.append(pattern[i : i + 2])  # escaped punctuation is literal in both
            i += 2
            continue
        if in_class:
            if c == "[":
                raise JavaRegexError("nested character classes ([a[b]]) are not supported")
            if c == "&" and pattern.startswith("&&", i):
                raise JavaRegexError("character class intersections (&&) are not supported")
            if c == "]" and i > class_start:
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            opener = "[^" if pattern.startswith("[^", i) else "["
            i += len(opener)
            if pattern.startswith("]", i):
                raise JavaRegexError("a ']' first in a character class is not supported")
            class_start = i
            out.append(opener)
            continue
        if c == "(" and pattern.startswith("(?", i):
            i = _group_opening(pattern, i, out)
            continue
        out.append(c)
        i += 1
    if in_class:
        raise JavaRegexError("unclosed character class")
    return "".join(out)


def _group_opening(pattern: str, i: int, out: list[str]) -> int:
    """Translate the `(?...` at `i`; the index after what was consumed."""
    rest = pattern[i + 2 :]
    if rest.startswith(("<=", "<!")) or rest[:1] in (":", "=", "!", ">"):
        out.append("(?")
        return i + 2
    named = re.match(r"<([A-Za-z][A-Za-z0-9]*)>", rest)
    if named:
        out.append(f"(?P<{named.group(1)}>")
        return i + 2 + named.end()
    flags = re.match(r"([A-Za-z]*)(?:-([A-Za-z]*))?([:)])", rest)
    if flags is None:
        raise JavaRegexError(f"unknown group construct at {pattern[i : i + 4]!r}")
    used = set(flags.group(1)) | set(flags.group(2) or "")
    bad = sorted(used - _ALLOWED_FLAGS)
    if bad:
        raise JavaRegexError(f"inline flags {''.join(bad)!r} are not supported (only i, m, s)")
    if flags.group(3) == ")" and i != 0:
        raise JavaRegexError(
            "inline flags are supported only at the start of the pattern, or scoped as (?i:...)"
        )
    out.append(pattern[i : i + 2 + flags.end()])
    return i + 2 + flags.end()


def compile_java(pattern: str) -> re.Pattern[str]:
    """The compiled translation; JavaRegexError if the pattern cannot be used."""
    translated = translate(pattern)
    try:
        return re.compile(translated, re.ASCII)
    except re.error as exc:
        raise JavaRegexError(f"not a valid regex: {exc}") from None


def find_in(compiled: re.Pattern[str], name: str) -> bool:
    """Spark's `findFirstIn`: the pattern occurs somewhere in `name`."""
    return compiled.search(name) is not None
