"""`--storage-option KEY=VALUE` for a table opened through a catalog: pyiceberg properties.

A table opened through `--catalog` reads its files with the FileIO the catalog configures
(pyiceberg's, which takes credentials the catalog vends), so the storage options become
that FileIO's properties. A key in pyiceberg's own spelling (`s3.endpoint`,
`adls.account-name`: any key with a dot) passes as given. Any other key is looked up in
dvtool's one table of storage option keys (`dvtool.storage.storage_option_keys.RULES`,
README "Storage options"), which names the backend argument it sets; this module only says
which pyiceberg property each such argument is, so the keys and aliases users know
(`AWS_ENDPOINT_URL`, `endpoint_url`, `AZURE_STORAGE_ACCOUNT_KEY`) keep their meaning.
"""

from __future__ import annotations

from collections.abc import Mapping

from dvtool.errors import UsageError
from dvtool.storage.storage_option_keys import RULES, UNSET, ArgumentPath, OptionRule, rule_for

_VIRTUAL_ADDRESSING = "s3.force-virtual-addressing"
# (fsspec protocol, backend argument) -> pyiceberg FileIO property.
_PROPERTY: dict[tuple[str, ArgumentPath], str] = {
    ("s3", ("key",)): "s3.access-key-id",
    ("s3", ("secret",)): "s3.secret-access-key",
    ("s3", ("token",)): "s3.session-token",
    ("s3", ("endpoint_url",)): "s3.endpoint",
    ("s3", ("client_kwargs", "region_name")): "s3.region",
    ("s3", ("profile",)): "s3.profile-name",
    ("s3", ("anon",)): "s3.anonymous",
    ("s3", ("config_kwargs", "s3", "addressing_style")): _VIRTUAL_ADDRESSING,
    ("gs", ("project",)): "gcs.project-id",
    ("abfs", ("account_name",)): "adls.account-name",
    ("abfs", ("account_key",)): "adls.account-key",
    ("abfs", ("client_id",)): "adls.client-id",
    ("abfs", ("client_secret",)): "adls.client-secret",
    ("abfs", ("tenant_id",)): "adls.tenant-id",
    ("abfs", ("sas_token",)): "adls.sas-token",
    ("abfs", ("connection_string",)): "adls.connection-string",
    ("abfs", ("anon",)): "adls.anon",
}


def _property_value(name: str, value: object) -> str:
    """A converted value as pyiceberg's property `name` spells it (botocore's addressing
    style as pyiceberg's flag)."""
    if name == _VIRTUAL_ADDRESSING:
        value = value == "virtual"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def catalog_properties(options: Mapping[str, str]) -> dict[str, str]:
    """The pyiceberg FileIO properties the storage options set; UsageError for a key that
    is neither pyiceberg's nor one of README's keys with a pyiceberg equivalent (a key
    several backends know sets each one's property that pyiceberg has)."""
    properties: dict[str, str] = {}
    for key, value in options.items():
        if "." in key:
            properties[key] = value
        else:
            properties.update(_mapped(key, value))
    return properties


def _mapped(key: str, value: str) -> dict[str, str]:
    found = [(p, rule) for p in RULES if (rule := rule_for(p, key)) is not None]
    mapped: dict[str, str] = {}
    ignored = False
    for protocol, rule in found:
        if rule.refused is not None:
            raise UsageError(f"--storage-option {key}: {rule.meaning}", hint=rule.refused)
        if rule.target is None:
            ignored = True  # accepted and ignored, as for Delta tables
            continue
        name = _PROPERTY.get((protocol, rule.target))
        if name is None:
            continue
        converted = rule.convert(key, value, f"{protocol} catalog")
        if converted is not UNSET:
            mapped[name] = _property_value(name, converted)
    if not mapped and not ignored and not _known_unset(found, key, value):
        raise _unknown(key)
    return mapped


def _known_unset(found: list[tuple[str, OptionRule]], key: str, value: str) -> bool:
    """Whether a key some backend maps says "set nothing" (`anon=false`)."""
    return any(
        _PROPERTY.get((p, r.target)) is not None and r.convert(key, value, p) is UNSET
        for p, r in found
        if r.target is not None
    )


def _unknown(key: str) -> UsageError:
    return UsageError(
        f"--storage-option {key} has no pyiceberg FileIO property for tables opened with --catalog",
        hint="Give pyiceberg's property itself (e.g. s3.endpoint=http://127.0.0.1:9000), "
        "or set it in the catalog's configuration (~/.pyiceberg.yaml).",
    )
