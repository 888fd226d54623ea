"""`--storage-option` keys as pyiceberg FileIO properties for tables opened with --catalog
(dvtool/iceberg/catalog_options.py): every key README's table knows for a backend argument
pyiceberg has reaches pyiceberg's property, and pyiceberg's FileIO takes the result."""

from __future__ import annotations

from pathlib import Path

import pyiceberg.io as pyiceberg_io
import pytest

from dvtool.errors import UsageError
from dvtool.iceberg.catalog_options import _PROPERTY, catalog_properties


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:9000", {"s3.endpoint": "http://127.0.0.1:9000"}),
        ("endpoint_url", "http://h:1", {"s3.endpoint": "http://h:1"}),
        ("aws_access_key_id", "AK", {"s3.access-key-id": "AK"}),
        ("AWS_SECRET_ACCESS_KEY", "SK", {"s3.secret-access-key": "SK"}),
        ("AWS_REGION", "eu-west-1", {"s3.region": "eu-west-1"}),
        ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false", {"s3.force-virtual-addressing": "false"}),
        ("AWS_S3_ADDRESSING_STYLE", "virtual", {"s3.force-virtual-addressing": "true"}),
        ("AZURE_STORAGE_ACCOUNT_KEY", "k", {"adls.account-key": "k"}),
        ("account_name", "acct", {"adls.account-name": "acct"}),
        ("GOOGLE_PROJECT_ID", "p", {"gcs.project-id": "p"}),
        ("s3.endpoint", "http://x:1", {"s3.endpoint": "http://x:1"}),  # pyiceberg's own
        ("AWS_S3_LOCKING_PROVIDER", "dynamodb", {}),  # delta-rs's commits: ignored, as for Delta
    ],
)
def test_keys_become_pyiceberg_properties(key: str, value: str, expected: dict[str, str]) -> None:
    assert catalog_properties({key: value}) == expected


def test_anonymous_means_it_for_every_backend_that_knows_the_key() -> None:
    assert catalog_properties({"skip_signature": "true"}) == {
        "s3.anonymous": "true",
        "adls.anon": "true",
    }


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("nonsense", "1", "no pyiceberg FileIO property"),
        ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r", "does not assume roles"),
        ("AWS_ENDPOINT_URL", "127.0.0.1:9000", "http:// or https://"),
        ("AWS_SKIP_SIGNATURE", "maybe", "true or false"),
    ],
)
def test_refusals_name_the_key(key: str, value: str, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        catalog_properties({key: value})
    assert key in caught.value.message and said in str(caught.value)


def test_every_property_is_one_pyiceberg_defines() -> None:
    """The properties produced are the names pyiceberg's FileIO module defines."""
    source = Path(pyiceberg_io.__file__).read_text()
    for name in set(_PROPERTY.values()):
        assert f'"{name}"' in source, name
