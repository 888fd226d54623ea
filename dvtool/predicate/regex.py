"""Spark's RLIKE on pyarrow: a Java regular expression as an RE2 pattern of the same meaning.

Spark runs `s RLIKE p` (regexp_like, regexp) as `Pattern.compile(p).matcher(s).find()`, dvtool
as `pc.match_substring_regex` (RE2, unanchored). `java_to_re2` walks the pattern once, rewriting
what the two read differently (each difference is checked on Spark by tests/predicate): Java's
`.` excludes \\r \\u0085 \\u2028 \\u2029 too; `$` and `\\Z` match at the end or before a final
\\r\\n or line terminator but never between \\r and \\n, which `_DOLLAR` says only where nothing
follows and the text before cannot end with a \\r it cannot extend by the \\n (`\\s*$` can, `\\s$`
cannot); `\\s` has \\x0B; a group that can match empty text is repeated differently once an
iteration matched empty, so it is repeated at most once. Classes become code point ranges,
`\\Q...\\E` escaped literals, `(?<n>` `(?P<n>`. What RE2 lacks or reads differently (`_WHY`),
what Java rejects or reads surprisingly and what RE2 still rejects are PredicateErrors naming
the construct, its offset and a hint.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from dvtool.arrays import arrow_values
from dvtool.errors import PredicateError

__all__ = ["java_to_re2"]

Ranges = tuple[tuple[int, int], ...]
_MAX = 0x10FFFF
# Java's \d \s \w (ASCII; RE2's \s lacks \x0B) and their complements \D \S \W
_SETS: dict[str, Ranges] = {"d": ((48, 57),), "D": ((0, 47), (58, _MAX)), "s": ((9, 13), (32, 32))}
_SETS |= {"S": ((0, 8), (14, 31), (33, _MAX)), "w": ((48, 57), (65, 90), (95, 95), (97, 122))}
_SETS["W"] = ((0, 47), (58, 64), (91, 94), (96, 96), (123, _MAX))
_TERMINATORS: Ranges = ((0x0A, 0x0A), (0x0D, 0x0D), (0x85, 0x85), (0x2028, 0x2029))
_DOLLAR = r"(?:\r\n|[\n\r\x{85}\x{2028}\x{2029}])?\z"
_CHARS = {"t": 9, "n": 10, "r": 13, "f": 12, "a": 7}
_WHY = {  # why a construct is refused, by escape letter or `_Translator.fail` key
    **dict.fromkeys("bB", "Java 17's word characters include non-ASCII letters, RE2's do not"),
    **dict.fromkeys("pP", "Java 17's Unicode tables are older than RE2's: list the ranges"),
    **dict.fromkeys("hHvVRXG", "RE2 lacks it (or reads it otherwise): spell it out as a class"),
    **dict.fromkeys("ecuN", "RE2 lacks it: write the character or \\x{hhhh} (\\e is \\x{1B})"),
    **dict.fromkeys("k123456789", "RE2 has no backreferences"),
    "0": "RE2 lacks octal escapes: write \\x{hh}",
    "x": "write \\xhh or \\x{h..h}, at most 10FFFF",
    "": "a trailing \\ escapes nothing",
    "$": "Java's $ also matches before a final line terminator: put $ last or use \\z",
    "\r": "Java's $ never matches between \\r and \\n: spell the line end out with \\z",
    "?": "Java's (?i) folds ASCII only; use lower(s) RLIKE ... instead of (?i)",
    "<": "a group name is a Latin letter, then letters or digits, used once",
    "=": "RE2 has no lookaround or atomic groups",
    "[": "RE2 lacks class union and intersection: write one flat class",
    "empty": "Java and RE2 repeat an empty match differently: make the group take a character",
}
_GROUPS = {"=": "lookahead", "!": "lookahead", ">": "atomic group"}
_QUANTIFIER = re.compile(r"[*+?]|\{(\d+)(,(\d*))?\}")
_HEX = re.compile(r"\{([0-9a-fA-F]{1,8})\}|[0-9a-fA-F]{2}")


@functools.lru_cache(maxsize=256)
def java_to_re2(pattern: str) -> str:
    """The RE2 pattern matching where Java's `find()` does, else PredicateError (see above)."""
    re2 = _Translator(pattern).run()
    try:
        pc.match_substring_regex(arrow_values.array([""], pa.string()), pattern=re2)
    except pa.ArrowInvalid as e:
        reason = str(e).splitlines()[0]
        raise PredicateError(f"RLIKE pattern {pattern!r}: RE2 rejects it: {reason}") from None
    return re2


def _char(c: int) -> str:
    """Code point `c` as an RE2 literal, in or outside a class."""
    ch = chr(c)
    plain = (ch.isascii() and (ch.isalnum() or ch == "_")) or (c > 0xA0 and ch.isprintable())
    return ch if plain else "\\" + ch if 0x21 <= c <= 0x7E else f"\\x{{{c:X}}}"


@dataclass(frozen=True)
class _Atom:
    """What a quantifier would repeat: may the match end with \\r before it (`cr_before`),
    may it end with \\r (`cr`), take a \\n (`nl`), match empty text (`empty`); and could the
    branch match empty text before it (`empty_before`)."""

    cr_before: bool
    cr: bool
    nl: bool
    empty: bool
    empty_before: bool


@dataclass
class _Frame:
    """The current branch of a group (or the pattern). `cr`: a match so far may end with a \\r
    that a final \\r\\n splits; `dollar`: it ended with `$`; `empty`: it can match empty text;
    `ends_cr`, `any_dollar`, `any_empty`: of a branch; `atom`: what a quantifier would repeat.

    Java and RE2 end the repetition of a group differently once an iteration matched empty
    text (`(?:\\A|^x*?){2}$` finds nothing in "x" in Java, RE2 finds it), so a group that can
    match empty text may not be repeated more than once."""

    start_cr: bool
    cr: bool = False
    ends_cr: bool = False
    dollar: bool = False
    any_dollar: bool = False
    empty: bool = True
    any_empty: bool = False
    atom: _Atom | None = None

    def end_branch(self) -> None:
        self.ends_cr, self.any_dollar = self.ends_cr or self.cr, self.any_dollar or self.dollar
        self.any_empty = self.any_empty or self.empty
        self.cr, self.dollar, self.atom, self.empty = self.start_cr, False, None, True


class _Translator:
    """One pass over a Java pattern, appending RE2 to `out` (see `java_to_re2`)."""

    def __init__(self, pattern: str) -> None:
        self.p, self.i, self.out = pattern, 0, [""]
        self.frames, self.names = [_Frame(False)], set[str]()

    def fail(self, what: str, at: int, why: str) -> PredicateError:
        return PredicateError(
            f"RLIKE pattern {self.p!r}: {what} at offset {at}: {_WHY.get(why, why)}"
        )

    def run(self) -> str:
        p = self.p
        while self.i < len(p):
            c, at = p[self.i], self.i
            self.i += 1
            if c == "\\" and p.startswith("Q", self.i):
                for k, ch in self.quoted():
                    self.one(((ch, ch),), False, "\\Q", k)
            elif c == "\\":
                self.one(*self.escape(at, in_class=False), p[at : self.i], at)
            elif c == "|":
                self.frames[-1].end_branch()
                self.out.append("|")
            elif c in "^$":
                self.one((), c, c, at)
            elif c in "[()*+?{":
                run = {"[": self.char_class, "(": self.group, ")": self.close_group}
                run.get(c, self.quantifier)(at)
            else:
                self.one(_TERMINATORS if c == "." else ((ord(c), ord(c)),), c == ".", c, at)
        if len(self.frames) > 1:
            raise self.fail("(", len(p), "unclosed group: add )")
        return "".join(self.out)

    def emit(self, text: str, what: str, at: int) -> _Frame:
        """Append `text`, which must not follow a `$` (see the module docstring)."""
        if self.frames[-1].dollar:
            raise self.fail(f"{what} after $", at, "$")
        self.out.append(text)
        return self.frames[-1]

    def one(self, ranges: Ranges, mode: bool | str, what: str, at: int) -> None:
        """Append a one-character atom (a literal, a class or a class escape; `mode`: negated?)
        or the anchor `mode` (`^ \\A \\z`, or `$` for `$ \\Z`: `_DOLLAR` where that is exact)."""
        if isinstance(mode, str):
            frame = self.emit(_DOLLAR if mode == "$" else mode, what, at)
            if mode == "$" and frame.cr:
                raise self.fail("$ after a possible \\r", at, "\r")
            frame.atom, frame.dollar = None, mode == "$"
            return
        single = len(ranges) == 1 and ranges[0][0] == ranges[0][1] and not mode
        items = [_char(a) if a == b else f"{_char(a)}-{_char(b)}" for a, b in ranges]
        frame = self.emit(items[0] if single else f"[{'^' * mode}{''.join(items)}]", what, at)
        cr, nl = (any(a <= c <= b for a, b in ranges) != mode for c in (0x0D, 0x0A))
        frame.atom, frame.cr = _Atom(frame.cr, cr, nl, False, frame.empty), cr
        frame.empty = False

    def quoted(self) -> list[tuple[int, int]]:
        """`\\Q...\\E` (or to the end of the pattern), `Q` at `i`: (offset, code point)s."""
        end = self.p.find("\\E", self.i) % (len(self.p) + 1)
        start, self.i = self.i + 1, min(end + 2, len(self.p))
        return [(k, ord(self.p[k])) for k in range(start, end)]

    def escape(self, at: int, in_class: bool) -> tuple[Ranges, bool | str]:
        """The escape at `at` as `one` takes it: (ranges, False), or ((), anchor) outside `[]`."""
        p, e = self.p, self.p[at + 1 : at + 2]
        self.i = at + 2
        if e and e in "AzZ" and not in_class:
            return (), {"A": "\\A", "z": "\\z"}.get(e, "$")
        c = _CHARS.get(e, ord(e) if e and not (e.isascii() and e.isalnum()) else -1)
        if e == "x" and (m := _HEX.match(p, self.i)) and int(m[1] or m[0], 16) <= _MAX:
            c, self.i = int(m[1] or m[0], 16), m.end()
        if (e and e in _SETS) or c >= 0:
            return _SETS.get(e, ((c, c),)), False
        what = {"0": "octal escape"}.get(e, "backreference" if e.isdigit() else f"\\{e}")
        raise self.fail(what, at, e if e in _WHY else "not an escape Java and RE2 share")

    def char_class(self, at: int) -> None:
        """`[...]`: literals, ranges and `\\d \\s ...`, appended as one RE2 class of ranges."""
        p, ranges = self.p, list[tuple[int, int]]()
        negated = p.startswith("[^", at)
        first = self.i = at + 1 + negated

        def dash() -> bool:  # a - that is neither first nor last
            return p.startswith("-", self.i) and not p.startswith("-]", self.i)

        if p.startswith("]", first):
            raise self.fail("] first in a class", first, "escape it as \\]")
        while not p.startswith("]", self.i):
            k, item = self.i, self.class_item()
            if len(item) == 1 and item[0][0] == item[0][1] and p[k] != "-" and dash():
                self.i += 1
                end = () if p.startswith("-", self.i) else self.class_item()
                if len(end) != 1 or end[0][0] != end[0][1] or end[0][0] < item[0][0]:
                    why = "its end must be one character, not less than its start"
                    raise self.fail("class range", k, why)
                item = ((item[0][0], end[0][0]),)
            ranges += item
            if dash():
                raise self.fail("-", self.i, "a - in a class that is no range: escape it as \\-")
        self.i += 1
        self.one(tuple(sorted(ranges)), negated, "[", at)

    def class_item(self) -> Ranges:
        """A character or class escape at `i`; `[`, `&&` (Java's union, intersection) refused."""
        p, k = self.p, self.i
        if k >= len(p) or p[k] == "[" or p.startswith("&&", k):
            what = "[" if k >= len(p) else "nested class" if p[k] == "[" else "&&"
            raise self.fail(what, k, "unclosed class" if k >= len(p) else "[")
        self.i += 1
        if p.startswith("\\Q", k):
            return tuple((c, c) for _, c in self.quoted())
        return self.escape(k, in_class=True)[0] if p[k] == "\\" else ((ord(p[k]), ord(p[k])),)

    def group(self, at: int) -> None:
        """`(`, `(?:` and `(?<name>` (RE2's `(?P<name>`); every other `(?` is refused."""
        rest = self.p[at + 1 :]
        name = re.match(r"\?<([A-Za-z][A-Za-z0-9]*)>", rest)
        if rest[:1] == "?" and rest[:2] != "?:" and not (name and name[1] not in self.names):
            kind = "lookbehind" if rest[1:3] in ("<=", "<!") else _GROUPS.get(rest[1:2])
            flags = re.match(r"\?[a-zA-Z-]*[:)]", rest)
            what = kind or ("inline flags" if flags else "group name" if rest[1:2] == "<" else "(?")
            raise self.fail(what, at, "=" if kind else "?" if flags else "<")
        self.names |= {name[1]} if name else set()
        text = f"(?P{name[0][1:]}" if name else "(?:" if rest[:1] == "?" else "("
        self.emit(text, "(", at)
        self.i = at + len(text) - bool(name)
        self.frames.append(_Frame(self.frames[-1].cr, self.frames[-1].cr))

    def close_group(self, at: int) -> None:
        """`)`: the group is one atom; its end may be \\r, or `$`, where a branch's may."""
        if len(self.frames) == 1:
            raise self.fail(")", at, "unmatched: escape it as \\)")
        (group := self.frames.pop()).end_branch()
        parent = self.emit(")", ")", at)
        parent.atom = _Atom(parent.cr, group.ends_cr, False, group.any_empty, parent.empty)
        parent.cr, parent.dollar = group.ends_cr, group.any_dollar
        parent.empty = parent.empty and group.any_empty

    def quantifier(self, at: int) -> None:
        """`* + ? {n} {n,} {n,m}`, maybe lazy (`?`); possessive ones (`+`) are refused."""
        p, frame, m = self.p, self.frames[-1], _QUANTIFIER.match(self.p, at)
        if not m:
            raise self.fail("{", at, "Java reads it as a repetition: escape it as \\{")
        lo, hi = {"*": (0, -1), "+": (1, -1), "?": (0, 1)}.get(m[0], (int(m[1] or 0), -1))
        hi = int(m[3]) if m[3] else hi if m[0] in "*+?" or m[2] else lo
        self.i, what = m.end(), f"quantifier {m[0]}"
        self.emit("", what, at)
        if frame.atom is None or -1 < hi < lo:
            raise self.fail(what, at, "it is reversed" if frame.atom else "it repeats nothing")
        if p.startswith("+", self.i):
            raise self.fail("possessive quantifier", at, "RE2 lacks it: drop the +")
        atom = frame.atom
        if atom.empty and not 0 <= hi <= 1:
            raise self.fail(f"{what} of a group that can match empty text", at, "empty")
        self.i += p.startswith("?", self.i)
        self.out.append(p[at : self.i])
        # unbounded and taking \n: it takes the \n
        frame.cr = not (hi < 0 and atom.nl) and (atom.cr or (lo == 0 and atom.cr_before))
        frame.empty = atom.empty_before and (lo == 0 or atom.empty)
        frame.atom = None
