"""Storage options: the CLI's `--storage-option KEY=VALUE`s as arguments of the table's backend.

Users bring options written for other Delta tools, mostly delta-rs and polars, whose keys are
object_store's (`AWS_REGION`, `AWS_ENDPOINT_URL`, `GOOGLE_SERVICE_ACCOUNT`, ...), while the
fsspec backends dvtool uses (s3fs, gcsfs, adlfs) take other names, some nested (s3fs takes
the region as `client_kwargs={"region_name": ...}`); passed through unchanged, such a key
ended in a TypeError deep inside the backend. So every option is resolved here, once, into
*settings*: a path of keyword arguments (`("client_kwargs", "region_name")`) and a value.

- A key of `storage_option_keys.RULES` (README "Storage options" shows the table), matched
  case-insensitively as object_store matches them, gives its backend argument, the value
  converted (booleans, addressing style, a service account's JSON). Keys that only steer
  delta-rs's own commit protocol (DynamoDB locking, unsafe rename, conditional put modes)
  are accepted and ignored: dvtool commits with conditional PUTs of its own (README
  "Tables and storage").
- Any other key must be an explicit parameter of the backend class's `__init__`
  (introspected by `backend_parameters`, so a newer backend's parameters work), its value
  converted by the parameter's type (annotation, else default, else `_NUMERIC`): a flag,
  a number of 0 or more, one of `_CHOICES`; of unknown type, only `true`/`false` become
  booleans. A dict parameter (s3fs's `client_kwargs`, `config_kwargs`) takes
  `PARAM.KEY=VALUE` or a JSON object, with only the keys of `_NESTED`: the dicts reach
  botocore at the first request, where anything else would be a TypeError, a crash.
- Anything else, a value of the wrong type, or two keys giving one argument different
  values is a `UsageError` naming the key (never the value, which may be a secret) and the
  scheme, with the keys that scheme takes. (`backends` adds the values the backend's
  constructor refuses.)

Spark executors have no fsspec: `arrow_storage` maps the same settings to pyarrow's names,
resolved without a backend class (`parameters=None`): keys outside `RULES` then pass through
as given, for it to take or refuse (the driver has checked them against fsspec's backend
when it opened the table). Only the standard library is imported, `inspect` and `json` only
when used (a local command without options never needs them); fsspec only to check
`default_cache_type`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from dvtool.errors import UsageError
from dvtool.storage.schemes import BY_PROTOCOL
from dvtool.storage.storage_option_keys import (
    RULES,
    UNSET,
    ArgumentPath,
    parse_flag,
    parse_json_object,
    rule_for,
)

__all__ = [
    "ParameterKind",
    "Setting",
    "backend_parameters",
    "resolve_storage_options",
    "storage_option_settings",
]


class ParameterKind(enum.Enum):
    """How a value given for a backend parameter is converted."""

    TEXT = "text"
    FLAG = "flag"
    INTEGER = "integer"
    NUMBER = "number"
    MAPPING = "mapping"  # a JSON object, or PARAM.SUBKEY=VALUE
    UNKNOWN = "unknown"  # as given, except that `true`/`false` become booleans


_KIND_WORDS = {
    ParameterKind.TEXT: "text",
    ParameterKind.FLAG: "true or false",
    ParameterKind.INTEGER: "a whole number, 0 or more",
    ParameterKind.NUMBER: "a number, 0 or more",
    ParameterKind.MAPPING: "a JSON object",
    ParameterKind.UNKNOWN: "text, true or false",
}
# Parameters no command line can give (event loops, session and credential objects).
_NOT_OPTIONS = frozenset(
    {"self", "loop", "asynchronous", "session", "request_session", "credential"}
)
# The keys dvtool passes inside a backend's dict parameters, with their kinds; "*": any key.
# The dicts reach botocore only at the first request, where an unknown key or a value of
# the wrong type is a TypeError no different from a bug's, so only these are let through:
# the client's region and TLS verification, the botocore Config settings S3-compatible
# stores need, and S3 request parameters (which botocore checks with errors of its own). A
# dict parameter of no entry here (gcsfs's `session_kwargs`) is not a storage option.
_NESTED: dict[str, dict[str, dict[ArgumentPath, ParameterKind]]] = {
    "s3": {
        "client_kwargs": {
            ("region_name",): ParameterKind.TEXT,
            ("verify",): ParameterKind.UNKNOWN,  # false, or a CA bundle's path
        },
        "config_kwargs": {
            ("connect_timeout",): ParameterKind.NUMBER,
            ("read_timeout",): ParameterKind.NUMBER,
            ("max_pool_connections",): ParameterKind.INTEGER,
            ("retries", "max_attempts"): ParameterKind.INTEGER,
            ("retries", "total_max_attempts"): ParameterKind.INTEGER,
            ("retries", "mode"): ParameterKind.TEXT,
            ("s3", "addressing_style"): ParameterKind.TEXT,
            ("signature_version",): ParameterKind.TEXT,
            ("request_checksum_calculation",): ParameterKind.TEXT,
            ("response_checksum_validation",): ParameterKind.TEXT,
        },
        "s3_additional_kwargs": {("*",): ParameterKind.TEXT},
    },
}


def _cache_types() -> frozenset[str]:
    """fsspec's read cache names: another `default_cache_type` fails only when a file is
    opened, with a KeyError."""
    from fsspec.caching import caches  # local: only checked where fsspec opens the table

    return frozenset(name for name in caches if isinstance(name, str))


# Text parameters that take one of a few names.
_CHOICES: dict[str, Callable[[], frozenset[str]]] = {"default_cache_type": _cache_types}
# Unannotated parameters that default to None but take numbers (s3fs, gcsfs).
_NUMERIC = {
    "default_block_size": ParameterKind.INTEGER,
    "block_size": ParameterKind.INTEGER,
    "requests_timeout": ParameterKind.NUMBER,
    "timeout": ParameterKind.NUMBER,
    "cache_timeout": ParameterKind.NUMBER,
}


@dataclass(frozen=True)
class Setting:
    """One backend argument set by one storage option."""

    option: str
    """The key as the user wrote it (error messages name it)."""
    path: ArgumentPath
    value: Any
    fallback: bool = False
    """Set only if no other option sets `path` (`AWS_DEFAULT_REGION` yields to `AWS_REGION`)."""


def backend_parameters(cls: type) -> dict[str, ParameterKind]:
    """The storage options a backend class takes: the explicit parameters of its `__init__`
    (not `**kwargs`, nor the objects no command line can give), each with its kind."""
    import inspect  # local: only tables opened with storage options introspect a backend

    init: Any = cast(Any, cls).__init__  # not the class: fsspec's metaclass hides it
    try:
        signature = inspect.signature(init)
    except (TypeError, ValueError):
        return {}
    return {
        name: _kind_of(name, parameter)
        for name, parameter in signature.parameters.items()
        if name not in _NOT_OPTIONS
        and not name.startswith("_")
        and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    }


def _kind_of(name: str, parameter: Any) -> ParameterKind:
    """The kind of a parameter: from its annotation, else its default, else its name."""
    annotation = parameter.annotation
    if annotation is not parameter.empty:
        text = annotation if isinstance(annotation, str) else str(annotation)
        if isinstance(annotation, type):
            text = annotation.__name__
        words = set(re.findall(r"[A-Za-z_]+", text)) - {"Optional", "None", "typing", "Union"}
        by_annotation = {
            frozenset({"bool"}): ParameterKind.FLAG,
            frozenset({"int"}): ParameterKind.INTEGER,
            frozenset({"float"}): ParameterKind.NUMBER,
            frozenset({"int", "float"}): ParameterKind.NUMBER,
            frozenset({"str"}): ParameterKind.TEXT,
            frozenset({"dict"}): ParameterKind.MAPPING,
        }.get(frozenset(words))
        if by_annotation is not None:
            return by_annotation
    default = parameter.default
    for python_type, kind in (
        (bool, ParameterKind.FLAG),
        (int, ParameterKind.INTEGER),
        (float, ParameterKind.NUMBER),
        (str, ParameterKind.TEXT),
        (dict, ParameterKind.MAPPING),
    ):
        if isinstance(default, python_type):
            return kind
    if name.endswith("_kwargs"):
        return ParameterKind.MAPPING
    return _NUMERIC.get(name, ParameterKind.UNKNOWN)


def resolve_storage_options(
    protocol: str,
    options: Mapping[str, Any],
    parameters: Mapping[str, ParameterKind] | None = None,
) -> dict[str, Any]:
    """The keyword arguments of `protocol`'s fsspec backend for the user's storage options.

    `parameters` are the backend's (`backend_parameters`); without them keys outside
    `RULES` pass through unchecked (see the module docstring). UsageError for an unknown
    key, a value of the wrong type, or two options giving one argument different values.
    """
    kwargs: dict[str, Any] = {}
    for setting in storage_option_settings(protocol, options, parameters):
        node = kwargs
        for part in setting.path[:-1]:
            node = node.setdefault(part, {})
        node[setting.path[-1]] = setting.value
    return kwargs


def storage_option_settings(
    protocol: str,
    options: Mapping[str, Any],
    parameters: Mapping[str, ParameterKind] | None = None,
) -> list[Setting]:
    """The backend arguments the options set, one `Setting` per argument (ignored keys and
    overridden fallbacks left out); errors as `resolve_storage_options`."""
    where, backend = _label(protocol)
    settings: list[Setting] = []
    for option, value in options.items():
        settings.extend(_settings_of(protocol, option, value, parameters, where))
    return _without_conflicts(settings, backend)


def _settings_of(
    protocol: str,
    option: str,
    value: Any,
    parameters: Mapping[str, ParameterKind] | None,
    where: str,
) -> list[Setting]:
    """The settings of one option."""
    rule = rule_for(protocol, option)
    if rule is not None:
        if rule.refused is not None:
            raise UsageError(
                f"--storage-option {option} is not supported for {where} tables: {rule.meaning}",
                hint=rule.refused,
            )
        if rule.target is None:
            return []
        converted = rule.convert(option, _as_text(value), where)
        if converted is UNSET:
            return []
        return [Setting(option, rule.target, converted, rule.fallback)]
    return _parameter_settings(protocol, option, value, parameters, where)


def _parameter_settings(
    protocol: str,
    option: str,
    value: Any,
    parameters: Mapping[str, ParameterKind] | None,
    where: str,
) -> list[Setting]:
    """The settings of an option named after a backend parameter (`PARAM` or
    `PARAM.KEY...` for a dict parameter)."""
    name, dot, rest = option.partition(".")
    head, inner = name.lower(), tuple(rest.split(".")) if dot else ()
    if parameters is None:
        return [Setting(option, (head, *inner), _untyped(value))]
    kind = parameters.get(head)
    keys = _NESTED.get(protocol, {}).get(head)
    if kind is None or (kind is ParameterKind.MAPPING) != (keys is not None) or (dot and not keys):
        raise UsageError(
            f"--storage-option {option} is not an option for {where} tables",
            hint=_accepted(protocol, parameters),
        )
    if keys is not None:
        return _dict_settings(protocol, option, value, (head, *inner), keys, where)
    typed = _typed(option, _as_text(value), kind, where)
    choices = _CHOICES[head]() if head in _CHOICES else None
    if choices is not None and typed not in choices:
        raise UsageError(
            f"--storage-option {option} takes one of {', '.join(sorted(choices))}",
            hint=f"E.g. {option}={min(choices)}.",
        )
    return [Setting(option, (head,), typed)]


def _dict_settings(
    protocol: str,
    option: str,
    value: Any,
    path: ArgumentPath,
    keys: Mapping[ArgumentPath, ParameterKind],
    where: str,
) -> list[Setting]:
    """The settings of an option for a dict parameter: one value at `path` (`PARAM.KEY`),
    or every value of a JSON object (`PARAM`), each at a key dvtool passes (`keys`)."""
    head = path[0]
    if len(path) > 1:
        leaves: list[tuple[ArgumentPath, Any]] = [(path[1:], value)]
    elif isinstance(value, Mapping):
        leaves = list(_leaves(value))
    else:
        leaves = list(_leaves(parse_json_object(option, _as_text(value), where)))
    settings = []
    for inner, leaf in leaves:
        kind = keys.get(inner) or (keys.get(("*",)) if len(inner) == 1 else None)
        if kind is None:
            accepted = ", ".join(".".join(k) for k in keys)
            raise UsageError(
                f"--storage-option {option}: dvtool passes no {'.'.join(inner)} in {head} "
                f"to {_label(protocol)[1]}",
                hint=f"{head} takes {accepted} (as {head}.KEY=VALUE or a JSON object).",
            )
        argument = (head, *inner)
        settings.append(Setting(option, argument, _leaf(option, argument, leaf, kind, where)))
    return settings


def _leaf(option: str, path: ArgumentPath, value: Any, kind: ParameterKind, where: str) -> Any:
    """A value inside a dict parameter: text converted by `kind`, JSON values checked."""
    if isinstance(value, str):
        dotted = ".".join(path)
        named = option if option.lower() == dotted.lower() else f"{option} ({dotted})"
        return _typed(named, value, kind, where)
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
    fits = {
        ParameterKind.FLAG: isinstance(value, bool),
        ParameterKind.INTEGER: number and isinstance(value, int),
        ParameterKind.NUMBER: number,
        ParameterKind.UNKNOWN: isinstance(value, bool),
    }.get(kind, False)
    if not fits:
        raise UsageError(
            f"--storage-option {option} gives {'.'.join(path)} a JSON "
            f"{type(value).__name__}; it takes {_KIND_WORDS[kind]}",
            hint="Give the value as JSON of that type.",
        )
    return value


def _as_text(value: Any) -> str:
    """An option's value as text (the Python API may give booleans, numbers or dicts)."""
    if isinstance(value, Mapping):
        import json

        return json.dumps(dict(value))
    return value if isinstance(value, str) else str(value)


def _untyped(value: Any) -> Any:
    """A value of a parameter of unknown type: `true`/`false` become booleans."""
    if isinstance(value, str):
        return {"true": True, "false": False}.get(value.lower(), value)
    return value


def _typed(option: str, value: str, kind: ParameterKind, where: str) -> Any:
    """`value` converted for a parameter of `kind`."""
    if kind is ParameterKind.FLAG:
        return parse_flag(option, value, where)
    if kind in (ParameterKind.INTEGER, ParameterKind.NUMBER):
        try:
            number = int(value) if kind is ParameterKind.INTEGER else float(value)
        except ValueError:
            number = -1
        if number < 0:  # sizes, counts and timeouts: a negative one breaks reads later
            raise UsageError(
                f"--storage-option {option} takes a number, 0 or more, for {where} tables",
                hint=f"Give e.g. {option}=10.",
            )
        return number
    if kind is ParameterKind.TEXT:
        return value
    return _untyped(value)


def _leaves(mapping: Mapping[str, Any]) -> Iterable[tuple[ArgumentPath, Any]]:
    """(path, value) of every non-dict value of a nested dict; an empty dict has none."""
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            for path, leaf in _leaves(value):
                yield (str(key), *path), leaf
        else:
            yield (str(key),), value


def _without_conflicts(settings: list[Setting], backend: str) -> list[Setting]:
    """One setting per argument: equal repeats merged, a fallback dropped when another
    option sets its argument; UsageError for different values or one argument set both
    whole and inside (`client_kwargs={...}` vs a region in it is fine: both are inside)."""
    chosen: dict[ArgumentPath, Setting] = {}
    for setting in sorted(settings, key=lambda s: s.fallback):
        previous = chosen.get(setting.path)
        if previous is None:
            chosen[setting.path] = setting
        elif previous.value != setting.value and previous.fallback == setting.fallback:
            raise _conflict(previous, setting, backend)
    kept = list(chosen.values())
    for a in kept:
        for b in kept:
            if len(a.path) < len(b.path) and b.path[: len(a.path)] == a.path:
                raise _conflict(a, b, backend)
    return kept


def _conflict(a: Setting, b: Setting, backend: str) -> UsageError:
    return UsageError(
        f"--storage-option {a.option} and {b.option} both set {backend}'s "
        f"{'.'.join(a.path)}, differently",
        hint="Give only one of them.",
    )


def _accepted(protocol: str, parameters: Mapping[str, ParameterKind]) -> str:
    """The hint of an unknown key: the keys `protocol`'s tables take."""
    where, backend = _label(protocol)
    nested = _NESTED.get(protocol, {})
    names = [
        f"{name}.KEY" if name in nested else name
        for name, kind in sorted(parameters.items())
        if kind is not ParameterKind.MAPPING or name in nested
    ]
    own = ", ".join(names) or "none"
    rules = [rule.keys[0] for rule in RULES.get(protocol, ()) if rule.target is not None]
    if not rules:
        return f"{where.capitalize()} tables take {backend}'s parameters: {own}."
    return (
        f"{where} tables take {backend}'s parameters ({own}) and {', '.join(rules)}, ... "
        '(README "Storage options").'
    )


def _label(protocol: str) -> tuple[str, str]:
    """How messages name `protocol`'s tables (`s3://`) and its backend package (`s3fs`)."""
    scheme = BY_PROTOCOL.get(protocol)
    return (scheme.label, scheme.backend) if scheme else (f"{protocol}://", protocol)
