"""`java_to_re2` (dvtool/predicate/regex.py): Java's RLIKE patterns on RE2, checked on Spark.

- Refusals: every construct RE2 lacks or reads differently is a one-line PredicateError that
  names it and its offset.
- Translations: a few exact RE2 texts, so a change in the output is seen.
- Spark: a local session (UTC, like tests/predicate/test_spark_semantics.py) evaluates
  `s RLIKE p` for a corpus of accepted patterns x strings (line terminators, \\x0B, case,
  accents, NULL), and dvtool's `pc.match_substring_regex` of the translation must agree on
  every pair; the Java/RE2 differences the module handles are shown on Spark itself; and
  hypothesis draws patterns from a grammar of the supported constructs and strings over a
  small alphabet with every line terminator, each batch checked in one Spark query.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dvtool.errors import PredicateError
from dvtool.predicate.regex import java_to_re2

SPARK = pytest.mark.xdist_group("spark-predicates")

# (pattern, what the message names, offset or None)
REFUSED = [
    ("(?=a)", "lookahead", 0),
    ("a(?!b)", "lookahead", 1),
    ("(?<=a)b", "lookbehind", 0),
    ("(?<!a)b", "lookbehind", 0),
    ("(?>a|ab)c", "atomic group", 0),
    ("a*+", "possessive quantifier", 1),
    ("a++", "possessive quantifier", 1),
    ("a?+", "possessive quantifier", 1),
    ("a{2}+", "possessive quantifier", 1),
    ("(a)\\1", "backreference", 3),
    ("(a)\\9", "backreference", 3),
    ("(?<n>a)\\k<n>", "\\k", 7),
    ("(?i)a", "inline flags", 0),
    ("a(?s).", "inline flags", 1),
    ("(?m)^a", "inline flags", 0),
    ("(?x)a b", "inline flags", 0),
    ("(?u)a", "inline flags", 0),
    ("(?d)a", "inline flags", 0),
    ("(?i:a)", "inline flags", 0),
    ("(?-i)a", "inline flags", 0),
    ("[a-z&&[^x]]", "&&", 4),
    ("[ab&&b]", "&&", 3),
    ("[a[bc]]", "nested class", 2),
    ("\\h", "\\h", 0),
    ("\\H", "\\H", 0),
    ("a\\v", "\\v", 1),
    ("\\V", "\\V", 0),
    ("\\R", "\\R", 0),
    ("\\X", "\\X", 0),
    ("\\Ga", "\\G", 0),
    ("\\e", "\\e", 0),
    ("\\cM", "\\c", 0),
    ("\\0101", "octal escape", 0),
    ("\\u00e9", "\\u", 0),
    ("\\N{LATIN SMALL LETTER E}", "\\N", 0),
    ("\\p{Alpha}", "\\p", 0),
    ("\\p{javaLowerCase}", "\\p", 0),
    ("\\p{IsLatin}", "\\p", 0),
    ("\\p{L}", "\\p", 0),
    ("\\pL", "\\p", 0),
    ("[\\P{L}]", "\\P", 1),
    ("\\bcat", "\\b", 0),
    ("a\\B", "\\B", 1),
    ("\\y", "\\y", 0),
    ("\\E", "\\E", 0),
    ("a$b", "b after $", 2),
    ("$a", "a after $", 1),
    ("(a$)b", "b after $", 4),
    ("(a$|c)\\n", "after $", 6),
    ("(a$)*", "quantifier * after $", 4),
    ("a$$", "$ after $", 2),
    ("\\r$", "$ after a possible \\r", 2),
    ("a\\s$", "$ after a possible \\r", 3),
    ("[^a]$", "$ after a possible \\r", 4),
    ("x\\W?$", "$ after a possible \\r", 4),
    ("(?:a|\\r)$", "$ after a possible \\r", 8),
    ("a{", "{", 1),
    ("{1}", "quantifier {1}", 0),
    ("a{,2}", "{", 1),
    ("a{ 2}", "{", 1),
    ("*a", "quantifier *", 0),
    ("a|+", "quantifier +", 2),
    ("(?:?)", "quantifier ?", 3),
    ("^*a", "quantifier *", 1),
    ("a**", "quantifier *", 2),
    ("a{1}{2}", "quantifier {2}", 4),
    ("a{2,1}", "quantifier {2,1}", 1),
    ("[]a]", "] first in a class", 1),
    ("[^]a]", "] first in a class", 2),
    ("[a-c-e]", "-", 4),
    ("[\\d-z]", "-", 3),
    ("[--a]", "-", 2),
    ("[z-a]", "class range", 1),
    ("[a-\\d]", "class range", 1),
    ("[!--]", "class range", 1),
    ("(a", "(", 2),
    ("a)", ")", 1),
    ("[a", "[", 2),
    ("a\\", "\\", 1),
    ("(?:\\A|^x*?){2}$", "quantifier {2} of a group that can match empty text", 11),
    ("(?:^x*?)+", "quantifier + of a group that can match empty text", 8),
    ("(a|)*", "quantifier * of a group that can match empty text", 4),
    ("((a)?)*", "quantifier * of a group that can match empty text", 6),
    ("\\x{110000}", "\\x", 0),
    ("\\xg1", "\\x", 0),
    ("(?<1a>x)", "group name", 0),
    ("(?<a_b>x)", "group name", 0),
    ("(?<a>x)(?<a>y)", "group name", 7),
    ("(?#note)a", "(?", 0),
    ("a{1001}", "RE2 rejects it", None),
]


@pytest.mark.parametrize(("pattern", "what", "offset"), REFUSED)
def test_refusals_name_the_construct_and_where(pattern: str, what: str, offset: int | None) -> None:
    with pytest.raises(PredicateError) as caught:
        java_to_re2(pattern)
    message = caught.value.message
    assert what in message and "\n" not in message and caught.value.exit_code == 2
    assert repr(pattern) in message
    if offset is not None:
        assert f"{what} at offset {offset}:" in message


def test_a_hint_says_what_to_write_instead() -> None:
    hints = {
        "(?i)abc": "lower(s) RLIKE",
        "\\e": "\\x{1B}",
        "\\u00e9": "\\x{hhhh}",
        "a{": "escape it as \\{",
        "[a-c-e]": "escape it as \\-",
        "\\r$": "\\z",
    }
    for pattern, hint in hints.items():
        with pytest.raises(PredicateError) as caught:
            java_to_re2(pattern)
        assert hint in caught.value.message, caught.value.message


DOT = r"[^\x{A}\x{D}\x{85}\x{2028}-\x{2029}]"
DOLLAR = r"(?:\r\n|[\n\r\x{85}\x{2028}\x{2029}])?\z"
TRANSLATED = {
    "": "",
    "a.b": f"a{DOT}b",
    "^a$": f"^a{DOLLAR}",
    "a\\Z": f"a{DOLLAR}",
    "\\s+$": rf"[\x{{9}}-\x{{D}}\x{{20}}]+{DOLLAR}",
    "\\S": r"[\x{0}-\x{8}\x{E}-\x{1F}\!-\x{10FFFF}]",
    "[^\\S]": r"[^\x{0}-\x{8}\x{E}-\x{1F}\!-\x{10FFFF}]",
    "[\\d_-]": r"[\-0-9_]",
    "(?<name>a|b)(?:c)(d)": "(?P<name>a|b)(?:c)(d)",
    "\\Qa.b$\\E*": r"a\.b\$*",
    "[\\Q]-\\E]": r"[\-\]]",
    "x{2,3}?\\d+?\\w??": r"x{2,3}?[0-9]+?[0-9A-Z_a-z]??",
    "\\x41\\x{1F600}\\t\\\\\\é\\ ": "A😀\\x{9}\\\\é\\x{20}",
    "\\A\\z": "\\A\\z",
    "a\\{}]": "a\\{\\}\\]",
    "a$|b": f"a{DOLLAR}|b",
    "(a$|b)": f"(a{DOLLAR}|b)",
    "\\s*$": rf"[\x{{9}}-\x{{D}}\x{{20}}]*{DOLLAR}",
    "\\r\\n$": rf"\x{{D}}\x{{A}}{DOLLAR}",
}


@pytest.mark.parametrize(("pattern", "expected"), TRANSLATED.items())
def test_translations(pattern: str, expected: str) -> None:
    assert java_to_re2(pattern) == expected


# -- Spark ------------------------------------------------------------------------------------


PATTERNS = [
    "",
    "a",
    "A",
    "é",
    "^a",
    "a$",
    "^$",
    "$",
    ".",
    "^.$",
    "a.",
    ".$",
    "a\\Z",
    "\\n$",
    "\\r\\n$",
    "\\n\\z",
    "[\\n]$",
    "\\s",
    "\\S",
    "\\s*$",
    "a\\s*$",
    "\\W+$",
    "[\\s]",
    "[^\\s]",
    "[\\S]",
    "[^\\S]",
    "\\x0B",
    "[\\x{85}-\\x{2029}]",
    "\\x{2028}$",
    "\\d+",
    "\\D",
    "\\w",
    "\\W",
    "[a-z]+",
    "[^a-z]",
    "[éÉ]",
    "[-_]",
    "\\Qa.\\E",
    "(?<n>a|b)$",
    "(a|\\n)$",
    "(?:a|b){2}",
    "a{1,2}?$",
    "\\A\\s",
    "a\\z",
    "_",
    "\\t|\\f",
]
STRINGS = [
    None,
    "",
    "\n",
    "\r",
    "\r\n",
    "\r\r\n",
    "a",
    "a\n",
    "a\r",
    "a\r\n",
    "a\n\n",
    "a\u2028",
    "a\u2029",
    "a\x85",
    "\x85",
    "A",
    "é",
    "É",
    "\x0b",
    "a\x0b",
    "\t",
    "\x0c",
    " ",
    "0",
    "123",
    "_",
    "ab",
    "aab",
    "b\na",
    "x\r\ny",
    "éa\n",
    "a-z",
]


def _dvtool(pattern: str, strings: list[str | None]) -> list[bool | None]:
    result = pc.match_substring_regex(pa.array(strings, pa.string()), pattern=java_to_re2(pattern))
    return result.to_pylist()


@SPARK
def test_corpus_agrees_with_spark(spark: Any) -> None:
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(list(enumerate(STRINGS)), "k int, s string")
    columns = [F.col("s").rlike(p).alias(f"r{j}") for j, p in enumerate(PATTERNS)]
    rows = frame.select("k", *columns).orderBy("k").collect()
    wrong = []
    for j, pattern in enumerate(PATTERNS):
        expected = [row[f"r{j}"] for row in rows]
        got = _dvtool(pattern, STRINGS)
        wrong += [
            (pattern, s, e, g) for s, e, g in zip(STRINGS, expected, got, strict=True) if e != g
        ]
    assert not wrong, wrong
    assert len(PATTERNS) * len(STRINGS) >= 40 * 30


# (Java pattern, text, what Spark says): RE2 reads the pattern (or NAIVE[pattern]) otherwise
NAIVE = {"\\r$": "\\r" + DOLLAR}
DIFFERENCES = [
    (".", "\r", False),  # Java's . excludes every line terminator
    (".", "\u2028", False),
    ("a.", "a\x85", False),
    ("a$", "a\n", True),  # $ before a final line terminator
    ("a$", "a\r\n", True),
    ("a$", "a\u2029", True),
    ("a\\n$", "a\n\n", True),
    ("^$", "\r\n", True),
    ("\\r$", "a\r\n", False),  # ... but never between \r and \n (the naive rewrite says True)
    ("$\\n", "a\n", True),  # a $ inside the pattern
    ("\\s", "\x0b", True),  # Java's \s has \x0B
    ("[\\S]", "\x0b", False),
    ("(?i)é", "É", False),  # Java's (?i) folds ASCII only
    ("\\v", "\n", True),  # vertical whitespace, not RE2's \x0B
    ("[a&&b]", "a", False),  # intersection
    ("[a[b]]", "b", True),  # union
    ("\\0101", "A", True),  # octal
    # an iteration of a repeated group that matched empty text (found by the property test)
    ("(?:\\A|^x*?){2}$", "x", False),
    ("(?:(?:^x*?)+){2}$", "x", False),
]


@SPARK
def test_the_differences_are_real_on_spark(spark: Any) -> None:
    from pyspark.sql import functions as F

    java = spark.sparkContext._jvm.System.getProperty("java.specification.version")
    cases = list(DIFFERENCES)
    if int(java) < 19:  # JDK 19: \b follows \w (JDK-8264160), Unicode 14 (U+1FAE0 is So)
        cases += [("\\bé", "é", True), ("\\p{So}", "\U0001fae0", False)]
    frame = spark.createDataFrame(
        [(j, p, s) for j, (p, s, _) in enumerate(cases)], "k int, p string, s string"
    )
    rows = frame.select("k", F.expr("s RLIKE p").alias("r")).orderBy("k").collect()
    assert [row["r"] for row in rows] == [e for _, _, e in cases]
    for pattern, text, expected in cases:
        try:
            naive = NAIVE.get(pattern, pattern)
            raw = pc.match_substring_regex(pa.array([text]), pattern=naive)[0].as_py()
        except pa.ArrowInvalid:
            raw = None
        assert raw != expected, (pattern, text)
        with contextlib.suppress(PredicateError):  # refused: fine
            assert _dvtool(pattern, [text]) == [expected], (pattern, text)


# -- hypothesis -------------------------------------------------------------------------------

LITERALS = ["a", "b", "A", "é", "0", "_", " ", "-", "\\.", "\\-", "\\\\", "\\$", "\\n", "\\r"]
LITERALS += ["\\t", "\\f", "\\x0B", "\\x{85}", "\\x{2028}", "\\x{2029}", "\\a", ".", "\\d"]
LITERALS += ["\\D", "\\w", "\\W", "\\s", "\\S", "\\Qa.\\E", "\\Q\\E", "\\Q\r\n\\E", "}", "]"]
CLASS_ITEMS = ["a", "b-d", "A-Z", "é", "0-9", "_", "\\n", "\\r", "\\x0B", "\\x{85}", "\\-"]
CLASS_ITEMS += ["\\x{2028}-\\x{2029}", "\\s", "\\S", "\\d", "\\w", "\\W", "\\]", " ", "\\t", "^"]
QUANTIFIERS = ["", "", "", "", "*", "+", "?", "{2}", "{0,1}", "{1,}", "*?", "+?", "??", "{1,2}?"]
ENDS = ["", "", "", "$", "\\Z", "\\z"]
ALPHABET = ["a", "b", "A", "é", "É", "0", "_", " ", "-", ".", "\t", "\x0b", "\x0c"]
ALPHABET += ["\n", "\r", "\r\n", "\x85", "\u2028", "\u2029"]


def _klass() -> st.SearchStrategy[str]:
    items = st.lists(st.sampled_from(CLASS_ITEMS), min_size=1, max_size=3).map("".join)
    return st.builds(lambda neg, body: f"[{'^' if neg else ''}{body}]", st.booleans(), items)


def _pattern() -> st.SearchStrategy[str]:
    atom = st.one_of(st.sampled_from(LITERALS), _klass())
    piece = st.builds(str.__add__, atom, st.sampled_from(QUANTIFIERS))
    anchors = st.sampled_from(["^", "\\A"])
    leaf = st.lists(st.one_of(piece, piece, anchors), max_size=3).map("".join)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        group = st.builds(
            lambda kind, body, end, q: f"{kind}{body}{end}){q}",
            st.sampled_from(["(", "(?:", "(?<g>"]),
            inner,
            st.sampled_from(ENDS),
            st.sampled_from(QUANTIFIERS),
        )
        branches = st.builds(lambda a, end, b: f"{a}{end}|{b}", inner, st.sampled_from(ENDS), inner)
        return st.one_of(
            group, branches, st.lists(st.one_of(inner, group), max_size=3).map("".join)
        )

    body = st.recursive(leaf, extend, max_leaves=6)
    return st.builds(str.__add__, body, st.sampled_from(ENDS))


TEXT = st.lists(st.sampled_from(ALPHABET), max_size=6).map("".join)
PATTERNS_PER_EXAMPLE, TEXTS_PER_PATTERN = 25, 8


@SPARK
@settings(
    max_examples=int(os.environ.get("RLIKE_EXAMPLES", "3")),
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(
        st.tuples(
            _pattern(), st.lists(TEXT, min_size=TEXTS_PER_PATTERN, max_size=TEXTS_PER_PATTERN)
        ),
        min_size=PATTERNS_PER_EXAMPLE,
        max_size=PATTERNS_PER_EXAMPLE,
    )
)
def test_generated_patterns_agree_with_spark(
    spark: Any, cases: list[tuple[str, list[str]]]
) -> None:
    from pyspark.sql import functions as F

    accepted = {}
    for pattern, texts in cases:
        try:
            accepted[pattern] = (_dvtool(pattern, list(texts)), texts)
        except PredicateError:
            continue
    records = [(p, s) for p, (_, texts) in accepted.items() for s in texts]
    assert records  # most drawn patterns are accepted
    frame = spark.createDataFrame(
        [(k, p, s) for k, (p, s) in enumerate(records)], "k int, p string, s string"
    )
    rows = frame.select("k", F.expr("s RLIKE p").alias("r")).orderBy("k").collect()
    expected = iter(row["r"] for row in rows)
    wrong = [
        (p, s, e, g)
        for p, (got, texts) in accepted.items()
        for s, g in zip(texts, got, strict=True)
        if (e := next(expected)) != g
    ]
    assert not wrong, wrong
