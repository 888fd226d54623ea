"""The storage option keys of other Delta tools, and the backend argument each one sets.

Users configure Delta tables for delta-rs, polars and other object_store-based readers, so
their storage options carry object_store's keys (`AWS_REGION`, `AWS_ENDPOINT_URL`,
`GOOGLE_SERVICE_ACCOUNT`, `AZURE_STORAGE_ACCOUNT_KEY`, with object_store's aliases) and
delta-rs's own (`AWS_PROFILE`, `AWS_S3_ADDRESSING_STYLE`, the DynamoDB locking keys).
`RULES` is the one table, per fsspec protocol, of what each of them means for the backend
dvtool uses (s3fs, gcsfs, adlfs): the argument it sets (a path into nested keyword
arguments: s3fs takes the region as `client_kwargs={"region_name": ...}`) and how its
value is converted, or that it is ignored (keys that steer only delta-rs's commit
protocol), or refused with what to do instead (a key the backend has no equivalent for).
README "Storage options" shows this table; `storage_options` applies it. Keys are matched
case-insensitively, as object_store matches them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dvtool.errors import UsageError

__all__ = [
    "RULES",
    "UNSET",
    "ArgumentPath",
    "OptionRule",
    "parse_flag",
    "parse_json_object",
    "rule_for",
]

ArgumentPath = tuple[str, ...]
"""Where a value goes: `("key",)`, or `("client_kwargs", "region_name")` inside a dict."""

_TRUE = frozenset({"true", "1", "yes", "y", "on"})  # object_store's truthy words
_FALSE = frozenset({"false", "0", "no", "n", "off"})
UNSET = object()
"""A converter's "set nothing" (GCS `anon=false`)."""

Converter = Callable[[str, str, str], Any]  # (option, value, scheme label) -> value or UNSET


def _text(option: str, value: str, where: str) -> Any:
    """The value as given (names, keys, secrets)."""
    return value


def parse_flag(option: str, value: str, where: str) -> Any:
    """A boolean from the words object_store takes (true/false, 1/0, yes/no, on/off)."""
    word = value.strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise UsageError(
        f"--storage-option {option} takes true or false for {where} tables",
        hint=f"Give {option}=true or {option}=false.",
    )


def _endpoint(option: str, value: str, where: str) -> Any:
    """An endpoint URL; without its scheme botocore would fail only at the first request."""
    if not re.match(r"^https?://[^/]", value, re.IGNORECASE):
        raise UsageError(
            f"--storage-option {option} must be a URL with http:// or https:// for {where} tables",
            hint=f"E.g. {option}=http://127.0.0.1:9000",
        )
    return value


def _addressing_from_flag(option: str, value: str, where: str) -> Any:
    """botocore's addressing style from object_store's virtual-hosted-style flag."""
    return "virtual" if parse_flag(option, value, where) else "path"


def _addressing_style(option: str, value: str, where: str) -> Any:
    """One of botocore's addressing styles."""
    style = value.strip().lower()
    if style not in ("path", "virtual", "auto"):
        raise UsageError(
            f"--storage-option {option} takes path, virtual or auto for {where} tables",
            hint=f"Give {option}=path or {option}=virtual.",
        )
    return style


def _existing_file(option: str, value: str, where: str) -> Any:
    """The path of an existing key file: gcsfs takes any other text for a raw access token."""
    path = os.path.expanduser(value)
    if not os.path.isfile(path):
        raise UsageError(
            f"--storage-option {option} names no file: {value}",
            hint="Give the path of the service account's JSON key file.",
        )
    return path


def parse_json_object(option: str, value: str, where: str) -> Any:
    """A JSON object given as text (a service account key, a dict parameter)."""
    import json  # local: only service account keys and dict parameters are JSON

    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:  # its message quotes no part of the (secret) text
        raise UsageError(
            f"--storage-option {option} is not valid JSON ({exc.msg} at line {exc.lineno} "
            f"column {exc.colno})",
            hint=f'Give a JSON object, e.g. {option}=\'{{"k": "v"}}\'.',
        ) from exc
    if not isinstance(parsed, dict):
        raise UsageError(
            f"--storage-option {option} must be a JSON object ({{...}}) for {where} tables",
            hint=f'Give a JSON object, e.g. {option}=\'{{"k": "v"}}\'.',
        )
    return parsed


def _anonymous_token(option: str, value: str, where: str) -> Any:
    """gcsfs's anonymous token for true, nothing for false."""
    return "anon" if parse_flag(option, value, where) else UNSET


@dataclass(frozen=True)
class OptionRule:
    """Keys users have (object_store's and delta-rs's) and the backend argument they set."""

    keys: tuple[str, ...]
    """As documented; matched case-insensitively."""
    target: ArgumentPath | None
    """The backend argument; None: accepted and ignored (`meaning` says why)."""
    meaning: str
    convert: Converter = _text
    fallback: bool = False
    refused: str | None = None
    """A known key the backend has no equivalent for: refused (`meaning` says why), with
    this hint saying what to give instead."""


_DELTA_RS_COMMITS = (
    "only delta-rs's commit protocol uses these; dvtool commits with conditional PUTs "
    "(If-None-Match), which need no lock table"
)

RULES: dict[str, tuple[OptionRule, ...]] = {
    "s3": (
        OptionRule(("AWS_ACCESS_KEY_ID", "access_key_id"), ("key",), "access key id"),
        OptionRule(
            ("AWS_SECRET_ACCESS_KEY", "secret_access_key"), ("secret",), "secret access key"
        ),
        OptionRule(
            ("AWS_SESSION_TOKEN", "AWS_TOKEN", "session_token", "token"),
            ("token",),
            "session token of temporary credentials",
        ),
        OptionRule(
            ("AWS_ENDPOINT_URL", "AWS_ENDPOINT", "endpoint_url", "endpoint"),
            ("endpoint_url",),
            "endpoint URL (MinIO, moto, other S3-compatible stores); http:// works as given",
            _endpoint,
        ),
        OptionRule(
            ("AWS_REGION", "region", "region_name"),
            ("client_kwargs", "region_name"),
            "region",
        ),
        OptionRule(
            ("AWS_DEFAULT_REGION", "default_region"),
            ("client_kwargs", "region_name"),
            "region, if AWS_REGION is not given",
            fallback=True,
        ),
        OptionRule(("AWS_PROFILE", "profile"), ("profile",), "profile of ~/.aws/config"),
        OptionRule(
            ("AWS_SKIP_SIGNATURE", "skip_signature", "anon"),
            ("anon",),
            "true: anonymous requests (public buckets)",
            parse_flag,
        ),
        OptionRule(
            ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "virtual_hosted_style_request"),
            ("config_kwargs", "s3", "addressing_style"),
            "true: virtual-hosted-style requests (bucket.endpoint); false: path style",
            _addressing_from_flag,
        ),
        OptionRule(
            ("AWS_S3_ADDRESSING_STYLE",),
            ("config_kwargs", "s3", "addressing_style"),
            "path, virtual or auto",
            _addressing_style,
        ),
        OptionRule(
            ("AWS_REQUEST_PAYER", "request_payer"),
            ("requester_pays",),
            "true: requester-pays buckets",
            parse_flag,
        ),
        OptionRule(
            ("AWS_ALLOW_HTTP", "allow_http"),
            None,
            "nothing to allow: s3fs reaches an http:// endpoint URL as given",
        ),
        OptionRule(
            (
                "AWS_S3_LOCKING_PROVIDER",
                "AWS_S3_ALLOW_UNSAFE_RENAME",
                "DELTA_DYNAMO_TABLE_NAME",
                "DELTA_DYNAMO_BILLING_MODE",
                "DELTA_DYNAMO_MAX_ELAPSED_REQUEST_TIME",
                "AWS_ENDPOINT_URL_DYNAMODB",
                "AWS_REGION_DYNAMODB",
                "AWS_ACCESS_KEY_ID_DYNAMODB",
                "AWS_SECRET_ACCESS_KEY_DYNAMODB",
                "AWS_SESSION_TOKEN_DYNAMODB",
                "AWS_CONDITIONAL_PUT",
                "conditional_put",
                "AWS_COPY_IF_NOT_EXISTS",
                "copy_if_not_exists",
            ),
            None,
            _DELTA_RS_COMMITS,
        ),
        OptionRule(
            ("AWS_ROLE_ARN", "AWS_IAM_ROLE_ARN", "AWS_S3_ASSUME_ROLE_ARN", "role_arn"),
            None,
            "s3fs does not assume roles itself",
            refused="Use AWS_PROFILE with a profile of ~/.aws/config that assumes the role "
            "(role_arn, source_profile).",
        ),
    ),
    "gs": (
        OptionRule(
            (
                "GOOGLE_SERVICE_ACCOUNT",
                "GOOGLE_SERVICE_ACCOUNT_PATH",
                "service_account",
                "service_account_path",
                "GOOGLE_APPLICATION_CREDENTIALS",
                "application_credentials",
            ),
            ("token",),
            "path of a service account's (or application credentials') JSON key file",
            _existing_file,
        ),
        OptionRule(
            ("GOOGLE_SERVICE_ACCOUNT_KEY", "service_account_key"),
            ("token",),
            "the JSON key itself (its text)",
            parse_json_object,
        ),
        OptionRule(("GOOGLE_PROJECT_ID", "project_id", "project"), ("project",), "project id"),
        OptionRule(
            ("GOOGLE_SKIP_SIGNATURE", "skip_signature", "anon"),
            ("token",),
            'true: anonymous requests (gcsfs token="anon")',
            _anonymous_token,
        ),
    ),
    "abfs": (
        OptionRule(
            ("AZURE_STORAGE_ACCOUNT_NAME", "account_name"), ("account_name",), "account name"
        ),
        OptionRule(
            (
                "AZURE_STORAGE_ACCOUNT_KEY",
                "AZURE_STORAGE_ACCESS_KEY",
                "AZURE_STORAGE_MASTER_KEY",
                "account_key",
                "access_key",
                "master_key",
            ),
            ("account_key",),
            "account key",
        ),
        OptionRule(
            ("AZURE_STORAGE_CLIENT_ID", "AZURE_CLIENT_ID", "client_id"),
            ("client_id",),
            "service principal (or managed identity) client id",
        ),
        OptionRule(
            ("AZURE_STORAGE_CLIENT_SECRET", "AZURE_CLIENT_SECRET", "client_secret"),
            ("client_secret",),
            "service principal secret",
        ),
        OptionRule(
            (
                "AZURE_STORAGE_TENANT_ID",
                "AZURE_TENANT_ID",
                "AZURE_STORAGE_AUTHORITY_ID",
                "AZURE_AUTHORITY_ID",
                "tenant_id",
                "authority_id",
            ),
            ("tenant_id",),
            "tenant id",
        ),
        OptionRule(
            ("AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_SAS_KEY", "sas_token", "sas_key"),
            ("sas_token",),
            "SAS token",
        ),
        OptionRule(
            ("AZURE_STORAGE_CONNECTION_STRING", "connection_string"),
            ("connection_string",),
            "connection string",
        ),
        OptionRule(
            ("AZURE_SKIP_SIGNATURE", "skip_signature"),
            ("anon",),
            "true: anonymous requests (public containers)",
            parse_flag,
        ),
        OptionRule(
            ("AZURE_STORAGE_USE_EMULATOR", "use_emulator"),
            None,
            "adlfs has no emulator switch",
            refused="For Azurite give its connection string: --storage-option "
            "connection_string='DefaultEndpointsProtocol=http;AccountName=...;"
            "AccountKey=...;BlobEndpoint=http://127.0.0.1:10000/...'",
        ),
    ),
}

_INDEX: dict[str, dict[str, OptionRule]] = {
    protocol: {key.lower(): rule for rule in rules for key in rule.keys}
    for protocol, rules in RULES.items()
}


def rule_for(protocol: str, key: str) -> OptionRule | None:
    """The rule of a storage option key for `protocol`'s tables (any letter case), if any."""
    return _INDEX.get(protocol, {}).get(key.lower())
