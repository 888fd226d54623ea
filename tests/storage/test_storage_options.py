"""Storage options (dvtool/storage/storage_options.py, storage_option_keys.py): the keys users
have for delta-rs and polars (object_store's) reach each fsspec backend as the argument it
takes, fsspec's own names keep working, and anything else is a usage error naming the key.

s3fs is installed here: its filesystems are built for real (they are lazy: no request is
sent) and their attributes checked. gcsfs and adlfs may not be: their mapping is checked
against stand-ins with the constructor signatures of gcsfs 2026.10 and adlfs 2026.8, and,
where the package is installed, every argument the rules set against the real class. At
the end, `dvtool inspect` and `delete` on the moto S3 server with deltalake's own options.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import Result
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from dvtool.errors import UsageError
from dvtool.storage.storage_option_keys import RULES
from dvtool.storage.storage_options import (
    ParameterKind,
    backend_parameters,
    resolve_storage_options,
)
from dvtool.storage.table_storage import Storage
from tests.cli_helpers import all_output, error_object, run
from tests.oracles import GOLDEN
from tests.s3_server import S3Server

S3_URI = "s3://bucket/table"


class GcsStandIn:
    """The parameters of gcsfs 2026.10.1's `GCSFileSystem.__init__`."""

    def __init__(
        self,
        project: str = "",
        access: str = "full_control",
        token: Any = None,
        block_size: Any = None,
        consistency: str = "none",
        cache_timeout: Any = None,
        secure_serialize: bool = True,
        check_connection: Any = None,
        requests_timeout: Any = None,
        requester_pays: bool = False,
        asynchronous: bool = False,
        session_kwargs: Any = None,
        loop: Any = None,
        timeout: Any = None,
        endpoint_url: Any = None,
        default_location: Any = None,
        version_aware: bool = False,
        **kwargs: Any,
    ) -> None: ...


class AdlfsStandIn:
    """The parameters of adlfs 2026.8.0's `AzureBlobFileSystem.__init__`."""

    def __init__(
        self,
        account_name: str | None = None,
        account_key: str | None = None,
        connection_string: str | None = None,
        credential: Any = None,
        sas_token: str | None = None,
        request_session: Any = None,
        socket_timeout: int = 30,
        blocksize: int = 4194304,
        client_id: str | None = None,
        client_secret: str | None = None,
        tenant_id: str | None = None,
        anon: bool | None = None,
        location_mode: str = "primary",
        loop: Any = None,
        asynchronous: bool = False,
        default_fill_cache: bool = True,
        default_cache_type: str = "bytes",
        version_aware: bool = False,
        assume_container_exists: bool | None = None,
        max_concurrency: int | None = None,
        timeout: int | None = None,
        connection_timeout: int | None = None,
        read_timeout: int | None = None,
        account_host: str | None = None,
        **kwargs: Any,
    ) -> None: ...


def s3fs_of(options: dict[str, str]) -> Any:
    """The s3fs filesystem `Storage` opens for `s3://bucket/table` with `options`."""
    return Storage.for_table(S3_URI, options)._fs


def resolved(protocol: str, options: dict[str, Any]) -> dict[str, Any]:
    """The backend's keyword arguments for `options` (gcsfs and adlfs: their stand-ins)."""
    cls = {"gs": GcsStandIn, "abfs": AdlfsStandIn}[protocol]
    return resolve_storage_options(protocol, options, backend_parameters(cls))


# -- S3: each key reaches s3fs as the argument it takes ------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "attribute", "expected"),
    [
        *[(k, "AKID", "key", "AKID") for k in ("AWS_ACCESS_KEY_ID", "access_key_id", "key")],
        *[(k, "s3cr3t", "secret", "s3cr3t") for k in ("AWS_SECRET_ACCESS_KEY", "secret")],
        *[
            (k, "tok", "token", "tok")
            for k in ("AWS_SESSION_TOKEN", "AWS_TOKEN", "session_token", "token")
        ],
        *[
            (k, "http://127.0.0.1:5055", "endpoint_url", "http://127.0.0.1:5055")
            for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT", "endpoint_url", "endpoint")
        ],
        *[
            (k, "eu-west-3", "client_kwargs", {"region_name": "eu-west-3"})
            for k in ("AWS_REGION", "AWS_DEFAULT_REGION", "region", "region_name")
        ],
        ("client_kwargs.region_name", "eu-west-3", "client_kwargs", {"region_name": "eu-west-3"}),
        (
            "client_kwargs",
            '{"region_name": "ap-south-1"}',
            "client_kwargs",
            {"region_name": "ap-south-1"},
        ),
        *[(k, "true", "anon", True) for k in ("AWS_SKIP_SIGNATURE", "skip_signature", "anon")],
        (
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
            "true",
            "config_kwargs",
            {"s3": {"addressing_style": "virtual"}},
        ),
        (
            "virtual_hosted_style_request",
            "false",
            "config_kwargs",
            {"s3": {"addressing_style": "path"}},
        ),
        ("AWS_S3_ADDRESSING_STYLE", "Path", "config_kwargs", {"s3": {"addressing_style": "path"}}),
        ("AWS_REQUEST_PAYER", "true", "requester_pays", True),
        ("requester_pays", "yes", "requester_pays", True),
        ("use_ssl", "false", "use_ssl", False),
        ("default_block_size", "1048576", "default_block_size", 1048576),
        ("version_aware", "true", "version_aware", True),
    ],
)
def test_s3_keys_reach_s3fs(key: str, value: str, attribute: str, expected: object) -> None:
    assert getattr(s3fs_of({key: value}), attribute) == expected


@pytest.mark.parametrize("key", ["AWS_PROFILE", "profile"])
def test_s3_profile_reaches_the_botocore_session(key: str) -> None:
    """s3fs hands arguments beyond its own to aiobotocore's session, which takes `profile`."""
    assert s3fs_of({key: "analytics"}).kwargs == {"profile": "analytics"}


@pytest.mark.parametrize("key", ["aws_region", "Aws_Region", "AWS_REGION", "REGION"])
def test_keys_are_matched_whatever_their_case(key: str) -> None:
    assert s3fs_of({key: "us-west-2"}).client_kwargs == {"region_name": "us-west-2"}
    assert s3fs_of({"KEY": "k", "Secret": "s"}).key == "k"


def test_delta_rs_commit_keys_and_allow_http_are_accepted_and_ignored() -> None:
    options = {
        "AWS_S3_LOCKING_PROVIDER": "dynamodb",
        "DELTA_DYNAMO_TABLE_NAME": "delta_log",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        "aws_conditional_put": "etag",
        "AWS_COPY_IF_NOT_EXISTS": "multipart",
        "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000",
        "AWS_ALLOW_HTTP": "true",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:5055",
    }
    assert resolve_storage_options("s3", options) == {"endpoint_url": "http://127.0.0.1:5055"}
    assert s3fs_of(options).endpoint_url == "http://127.0.0.1:5055"


def test_region_wins_over_default_region() -> None:
    options = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "eu-central-1"}
    assert s3fs_of(options).client_kwargs == {"region_name": "eu-central-1"}


def test_a_region_merges_with_other_client_kwargs() -> None:
    fs = s3fs_of({"client_kwargs": '{"verify": false}', "AWS_REGION": "eu-north-1"})
    assert fs.client_kwargs == {"verify": False, "region_name": "eu-north-1"}


def test_s3fs_dict_parameters_take_the_keys_botocore_takes() -> None:
    fs = s3fs_of(
        {
            "config_kwargs.connect_timeout": "5",
            "config_kwargs.retries.max_attempts": "3",
            "config_kwargs": '{"request_checksum_calculation": "when_required"}',
            "s3_additional_kwargs.ServerSideEncryption": "AES256",
            "client_kwargs.verify": "false",
        }
    )
    assert fs.config_kwargs == {
        "connect_timeout": 5.0,
        "retries": {"max_attempts": 3},
        "request_checksum_calculation": "when_required",
    }
    assert fs.s3_additional_kwargs == {"ServerSideEncryption": "AES256"}
    assert fs.client_kwargs == {"verify": False}


def test_every_s3_rule_target_is_an_s3fs_argument() -> None:
    """What the rules set is what this s3fs takes (`profile` goes on to aiobotocore)."""
    import s3fs

    parameters = backend_parameters(s3fs.S3FileSystem)
    targets = {rule.target[0] for rule in RULES["s3"] if rule.target is not None}
    assert targets - set(parameters) == {"profile"}
    assert parameters["client_kwargs"] is ParameterKind.MAPPING
    assert parameters["anon"] is ParameterKind.FLAG


def test_readme_shows_every_rule() -> None:
    """README "Storage options" is the documented form of the rules: every key and target."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### Storage options", 1)[1].split("\n## ", 1)[0]
    for protocol, rules in RULES.items():
        for rule in rules:
            for key in rule.keys:
                assert f"`{key}`" in section, (protocol, key)
            if rule.target is not None and protocol != "gs":
                assert f"`{'.'.join(rule.target)}`" in section, (protocol, rule.target)


# -- GCS and Azure ---------------------------------------------------------------------


def test_gcs_service_account_path(tmp_path: Path) -> None:
    key_file = tmp_path / "sa.json"
    key_file.write_text("{}")
    for key in (
        "GOOGLE_SERVICE_ACCOUNT",
        "GOOGLE_SERVICE_ACCOUNT_PATH",
        "google_service_account",
        "service_account",
        "GOOGLE_APPLICATION_CREDENTIALS",
    ):
        assert resolved("gs", {key: str(key_file)}) == {"token": str(key_file)}, key


def test_gcs_service_account_key_is_parsed() -> None:
    key = {"type": "service_account", "client_email": "x@p.iam.gserviceaccount.com"}
    for name in ("GOOGLE_SERVICE_ACCOUNT_KEY", "service_account_key"):
        assert resolved("gs", {name: json.dumps(key)}) == {"token": key}


def test_gcs_malformed_service_account_key_is_a_usage_error_without_the_secret() -> None:
    secret = '{"type": "service_account", "private_key": "-----BEGIN SECRET'
    with pytest.raises(UsageError) as caught:
        resolved("gs", {"GOOGLE_SERVICE_ACCOUNT_KEY": secret})
    assert "GOOGLE_SERVICE_ACCOUNT_KEY" in str(caught.value)
    assert "not valid JSON" in str(caught.value)
    assert "BEGIN SECRET" not in str(caught.value)


def test_gcs_missing_service_account_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="GOOGLE_SERVICE_ACCOUNT names no file"):
        resolved("gs", {"GOOGLE_SERVICE_ACCOUNT": str(tmp_path / "missing.json")})


def test_gcs_project_anonymous_and_own_parameters() -> None:
    assert resolved("gs", {"GOOGLE_PROJECT_ID": "p1"}) == {"project": "p1"}
    assert resolved("gs", {"project": "p1"}) == {"project": "p1"}
    assert resolved("gs", {"anon": "true"}) == {"token": "anon"}
    assert resolved("gs", {"anon": "false"}) == {}
    assert resolved("gs", {"token": "anon", "requester_pays": "true", "block_size": "65536"}) == {
        "token": "anon",
        "requester_pays": True,
        "block_size": 65536,
    }


def test_gcs_two_credentials_conflict(tmp_path: Path) -> None:
    key_file = tmp_path / "sa.json"
    key_file.write_text("{}")
    options = {"GOOGLE_SERVICE_ACCOUNT": str(key_file), "anon": "true"}
    with pytest.raises(UsageError, match="GOOGLE_SERVICE_ACCOUNT and anon both set"):
        resolved("gs", options)


@pytest.mark.parametrize(
    ("keys", "argument"),
    [
        (
            ("AZURE_STORAGE_ACCOUNT_NAME", "account_name", "azure_storage_account_name"),
            "account_name",
        ),
        (
            ("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_ACCESS_KEY", "account_key", "access_key"),
            "account_key",
        ),
        (("AZURE_CLIENT_ID", "AZURE_STORAGE_CLIENT_ID", "client_id"), "client_id"),
        (("AZURE_CLIENT_SECRET", "client_secret"), "client_secret"),
        (("AZURE_TENANT_ID", "AZURE_STORAGE_TENANT_ID", "tenant_id"), "tenant_id"),
        (
            ("AZURE_STORAGE_SAS_KEY", "AZURE_STORAGE_SAS_TOKEN", "sas_token", "sas_key"),
            "sas_token",
        ),
        (("AZURE_STORAGE_CONNECTION_STRING", "connection_string"), "connection_string"),
    ],
)
def test_azure_keys_reach_adlfs(keys: tuple[str, ...], argument: str) -> None:
    for key in keys:
        assert resolved("abfs", {key: "v"}) == {argument: "v"}, key


def test_azure_own_parameters_are_typed_by_annotation() -> None:
    options = {"anon": "true", "max_concurrency": "4", "location_mode": "secondary"}
    assert resolved("abfs", options) == {
        "anon": True,
        "max_concurrency": 4,
        "location_mode": "secondary",
    }
    with pytest.raises(UsageError, match="credential is not an option for abfs://"):
        resolved("abfs", {"credential": "x"})


def test_azure_emulator_switch_is_refused_with_what_to_give() -> None:
    with pytest.raises(UsageError) as caught:
        resolved("abfs", {"AZURE_STORAGE_USE_EMULATOR": "true"})
    assert "adlfs has no emulator switch" in str(caught.value)
    assert "connection_string" in str(caught.value)


def test_rule_targets_are_arguments_of_the_installed_s3fs() -> None:
    """s3fs is installed with the test extras; gcsfs and adlfs are not, and their rules are
    checked against stand-ins with their constructors' signatures (below)."""
    import inspect

    import s3fs
    from aiobotocore.session import AioSession

    parameters = backend_parameters(s3fs.S3FileSystem)
    targets = {rule.target[0] for rule in RULES["s3"] if rule.target is not None}
    # `profile` goes through s3fs's **kwargs to its session: AioSession(profile=...).
    assert targets - {"profile"} <= set(parameters)
    assert "profile" in inspect.signature(AioSession).parameters


def test_stand_ins_take_what_the_rules_set() -> None:
    for protocol, cls in (("gs", GcsStandIn), ("abfs", AdlfsStandIn)):
        targets = {rule.target[0] for rule in RULES[protocol] if rule.target is not None}
        assert targets <= set(backend_parameters(cls)), protocol


# -- refused options: UsageError naming the key, exit 2 through the CLI --------------------


@pytest.mark.parametrize(
    ("options", "needles"),
    [
        ({"bogus": "1"}, ["bogus", "s3://", "endpoint_url", "AWS_REGION"]),
        ({"anon": "maybe"}, ["anon", "true or false"]),
        ({"max_concurrency": "many"}, ["max_concurrency", "number"]),
        ({"client_kwargs": "[1]"}, ["client_kwargs", "JSON object"]),
        ({"key.sub": "x"}, ["key.sub"]),
        ({"AWS_ENDPOINT_URL": "127.0.0.1:5055"}, ["AWS_ENDPOINT_URL", "http://"]),
        ({"AWS_S3_ADDRESSING_STYLE": "sideways"}, ["AWS_S3_ADDRESSING_STYLE", "virtual"]),
        ({"key": "a", "AWS_ACCESS_KEY_ID": "b"}, ["key and AWS_ACCESS_KEY_ID both set"]),
        ({"AWS_ROLE_ARN": "arn:aws:iam::1:role/r"}, ["AWS_ROLE_ARN", "AWS_PROFILE"]),
        ({"loop": "x"}, ["loop is not an option"]),
        ({"max_concurrency": "0"}, ["max_concurrency", "must be >= 1"]),  # s3fs's ValueError
        ({"username": "u", "key": "k"}, ["username", "Supply either key or username"]),
        ({"default_block_size": "-1"}, ["default_block_size", "0 or more"]),
        ({"default_cache_type": "bogus"}, ["default_cache_type", "readahead"]),
        # inside s3fs's dicts only what botocore takes (else a TypeError at the first request)
        ({"client_kwargs.bogus": "1"}, ["no bogus in client_kwargs", "region_name"]),
        ({"client_kwargs": '{"bogus": 1}'}, ["no bogus in client_kwargs"]),
        ({"config_kwargs": '{"retries": {"max_attempts": "x"}}'}, ["max_attempts", "number"]),
        ({"config_kwargs.retries.max_attempts": "x"}, ["max_attempts", "number"]),
        ({"client_kwargs": '{"region_name": 5}'}, ["client_kwargs.region_name a JSON int"]),
    ],
)
def test_refused_s3_options_are_usage_errors(options: dict[str, str], needles: list[str]) -> None:
    with pytest.raises(UsageError) as caught:
        Storage.for_table(S3_URI, options)
    for needle in needles:
        assert needle in str(caught.value)


def _assert_usage_error(result: Result, *needles: str) -> None:
    assert result.exit_code == 2, all_output(result)
    error = error_object(result)
    assert error["kind"] == "usage"
    for needle in needles:
        assert needle in all_output(result)
    assert "Traceback" not in all_output(result)
    assert "internal error" not in all_output(result)


def test_cli_unknown_key_on_s3() -> None:
    result = run("inspect", S3_URI, "--storage-option", "bogus=1", "--json")
    _assert_usage_error(result, "--storage-option bogus", "s3://")


def test_cli_unknown_key_on_a_local_table() -> None:
    result = run("inspect", GOLDEN / "table-with-dv-small", "--storage-option", "bogus=1", "--json")
    _assert_usage_error(result, "--storage-option bogus", "local tables", "auto_mkdir")


def test_cli_s3_key_on_a_local_table() -> None:
    result = run(
        "inspect", GOLDEN / "table-with-dv-small", "--storage-option", "AWS_REGION=x", "--json"
    )
    _assert_usage_error(result, "AWS_REGION", "local tables")


def test_cli_backend_refusal_is_a_usage_error() -> None:
    result = run("inspect", S3_URI, "--storage-option", "max_concurrency=0", "--json")
    _assert_usage_error(result, "max_concurrency", "must be >= 1")


# -- end to end on the moto server, with deltalake's options -----------------------------


def _deltalake_ids(uri: str, options: dict[str, str]) -> list[int]:
    table = DeltaTable(uri, storage_options=options)
    reader = QueryBuilder().register("t", table).execute("select id from t")
    return sorted(pa.table(reader.read_all()).column("id").to_pylist())


def _delta_cli_options(s3: S3Server) -> list[str]:
    """deltalake's storage options for the server, as `--storage-option`s."""
    return [a for k, v in s3.delta_options().items() for a in ("--storage-option", f"{k}={v}")]


def test_inspect_and_delete_on_s3_with_deltalake_options(
    s3_server: S3Server, tmp_path: Path
) -> None:
    """delta-rs style options (AWS_ENDPOINT_URL, AWS_REGION, AWS_ALLOW_HTTP, ...) work as
    they are: dvtool reads and changes the table that deltalake reads with the same ones."""
    local = tmp_path / "t"
    ids = list(range(30))
    write_deltalake(str(local), pa.table({"id": pa.array(ids, pa.int64())}))
    uri = s3_server.upload(local, "storage-options/deltalake-keys")
    options = s3_server.delta_options()
    assert {"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ALLOW_HTTP"} <= set(options)

    inspected = run("inspect", uri, *_delta_cli_options(s3_server), "--json")
    assert inspected.exit_code == 0, all_output(inspected)
    document = json.loads(inspected.stdout)
    assert document["version"] == DeltaTable(uri, storage_options=options).version()
    assert document["logical_rows"] == len(_deltalake_ids(uri, options)) == len(ids)

    deleted = run("delete", uri, "--where", "id % 4 = 0", *_delta_cli_options(s3_server), "--json")
    assert deleted.exit_code == 0, all_output(deleted)
    assert _deltalake_ids(uri, options) == [i for i in ids if i % 4]
    assert (
        json.loads(deleted.stdout)["version"] == DeltaTable(uri, storage_options=options).version()
    )
