"""Binding the string parts of `--where`: LIKE, RLIKE and the string functions.

Spark's implicit casts of their arguments (integers, booleans and dates read as strings) are
explicit `Cast` nodes; patterns, prefixes and positions must be constants, so LIKE becomes
an anchored regex, RLIKE a Java regex translated to RE2 (regex.py: what RE2 cannot do as
Java does is refused here, when binding), and skipping can use prefixes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dvtool.errors import PredicateError
from dvtool.predicate import arrow, regex
from dvtool.predicate.sqltypes import (
    BINARY,
    BOOLEAN,
    BYTE,
    DATE,
    INT,
    LONG,
    NULL,
    SHORT,
    STRING,
)
from dvtool.predicate.syntax import SUPPORTED, node_sql
from dvtool.predicate.tree import Expr, Func, Like, Literal, Not

if TYPE_CHECKING:
    from dvtool.predicate.parse import Binder

_STRING_FUNCTIONS: dict[type[exp.Expr], str] = {exp.Lower: "lower", exp.Upper: "upper"}
_STRING_TESTS: dict[type[exp.Expr], str] = {
    exp.StartsWith: "startswith",
    exp.EndsWith: "endswith",
    exp.Contains: "contains",
}
_TO_STRING_OK = (BYTE, SHORT, INT, LONG, BOOLEAN, DATE)


class StringCalls:
    """The string part of a `Binder` (see the module docstring)."""

    def __init__(self, binder: Binder) -> None:
        self.binder = binder

    def handlers(self) -> dict[type[exp.Expr], Callable[[Any], Expr]]:
        """Binder handlers for the sqlglot nodes that are string constructs."""
        out: dict[type[exp.Expr], Callable[[Any], Expr]] = {
            exp.Like: self._like,
            exp.ILike: self._like,
            exp.Escape: self._like,
            exp.Length: self._length,
            exp.Substring: self._substring,
            exp.Trim: self._trim,
            exp.Concat: lambda n: self._concat(n.expressions),
            exp.DPipe: lambda n: self._concat([n.this, n.expression]),
            exp.RegexpLike: self.rlike,
        }
        for cls, name in _STRING_FUNCTIONS.items():
            out[cls] = functools.partial(self._string_function, name)
        for cls, name in _STRING_TESTS.items():
            out[cls] = functools.partial(self._string_test, name)
        return out

    def _like(self, node: exp.Expr) -> Expr:
        escape = "\\"
        if isinstance(node, exp.Escape):
            escape = self.binder.constant_string(
                self.binder.bind(node.expression), "the LIKE escape"
            )
            if len(escape) != 1:
                raise PredicateError(f"the LIKE escape must be one character, got {escape!r}")
            node = node.this
        if isinstance(node.expression, (exp.Any, exp.All)):
            raise PredicateError(f"LIKE ANY/ALL is not supported: {node_sql(node)}", hint=SUPPORTED)
        child = self.as_string(self.binder.bind(node.this), "LIKE")
        pattern_expr = self.binder.bind(node.expression)
        if pattern_expr.type == NULL or (
            isinstance(pattern_expr, Literal) and pattern_expr.value is None
        ):
            return Literal(None, BOOLEAN)
        pattern = self.binder.constant_string(pattern_expr, "the LIKE pattern")
        try:
            arrow.like_regex(pattern, escape)
        except ValueError as e:
            raise PredicateError(f"invalid LIKE pattern {pattern!r}: {e}") from None
        like: Expr = Like(child, pattern, escape, isinstance(node, exp.ILike))
        if node.args.get("negate"):
            like = Not(like)
        return self.binder.finish(like)

    def as_string(self, expr: Expr, context: str) -> Expr:
        if expr.type in (STRING, NULL):
            return self.binder.cast(expr, STRING)
        if expr.type in _TO_STRING_OK:
            return self.binder.cast(expr, STRING)
        raise PredicateError(f"{context} needs a string, got {expr.type}")

    def _string_function(self, name: str, node: exp.Expr) -> Expr:
        arg = self.as_string(self.binder.bind(node.this), f"{name}()")
        return self.binder.finish(Func(name, (arg,), STRING))

    def _length(self, node: exp.Length) -> Expr:
        arg = self.binder.bind(node.this)
        if arg.type != BINARY:
            arg = self.as_string(arg, "length()")
        return self.binder.finish(Func("length", (arg,), INT))

    def _substring(self, node: exp.Substring) -> Expr:
        arg = self.as_string(self.binder.bind(node.this), "substring()")
        args: list[Expr] = [
            arg,
            self.binder.constant_int(self.binder.bind(node.args["start"]), "the position"),
        ]
        if node.args.get("length") is not None:
            args.append(
                self.binder.constant_int(self.binder.bind(node.args["length"]), "the length")
            )
        return self.binder.finish(Func("substring", tuple(args), STRING))

    def _trim(self, node: exp.Trim) -> Expr:
        arg = self.as_string(self.binder.bind(node.this), "trim()")
        position = str(node.args.get("position") or "BOTH").upper()
        name = {"BOTH": "trim", "LEADING": "ltrim", "TRAILING": "rtrim"}[position]
        args: list[Expr] = [arg]
        if node.args.get("expression") is not None:
            chars = self.binder.constant_string(
                self.binder.bind(node.expression), "the trim characters"
            )
            args.append(Literal(chars, STRING))
        return self.binder.finish(Func(name, tuple(args), STRING))

    def _concat(self, nodes: Sequence[exp.Expr]) -> Expr:
        args = tuple(self.as_string(self.binder.bind(n), "concat()") for n in nodes)
        return self.binder.finish(Func("concat", args, STRING))

    def _string_test(self, name: str, node: exp.Expr) -> Expr:
        arg = self.as_string(self.binder.bind(node.this), f"{name}()")
        other = self.binder.bind(node.expression)
        if isinstance(other, Literal) and other.value is None:
            return Literal(None, BOOLEAN)
        text = self.binder.constant_string(other, f"the second argument of {name}()")
        return self.binder.finish(Func(name, (arg, Literal(text, STRING)), BOOLEAN))

    def rlike(self, node: exp.Expr) -> Expr:
        """`s RLIKE pattern`: Java's regex find() on RE2 (regex.py); a constant pattern."""
        child = self.as_string(self.binder.bind(node.this), "RLIKE")
        pattern = self.binder.bind(node.expression)
        if isinstance(pattern, Literal) and pattern.value is None:
            return Literal(None, BOOLEAN)
        text = self.binder.constant_string(pattern, "the RLIKE pattern")
        regex.java_to_re2(text)  # refuses what RE2 cannot do as Java does, now
        return self.binder.finish(Func("rlike", (child, Literal(text, STRING)), BOOLEAN))
