"""Delta's deletion vector descriptors (PROTOCOL.md "Deletion Vector Descriptor Schema").

A deletion vector (DV) is the set of row indexes of a data file that are logically
deleted. The log describes it with a `DeletionVectorDescriptor`: where the rows live
(`storageType` 'u': a DV file named by a Z85 UUID, 'p': a DV file by path, 'i': inline in
the log as Z85 text), at which offset, how many bytes and rows. The bytes themselves are
decoded by `dvtool.deletion_vectors.codec`; an inline DV is a bare bitmap (no size or CRC).

Errors are `dvtool.errors` types without a location; the DV store adds the DV file and the
data file they belong to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from pyroaring import BitMap64

from dvtool.deletion_vectors.codec import deserialize_bitmap, serialize_bitmap
from dvtool.delta.protocol import z85
from dvtool.errors import (
    DVCardinalityError,
    DVEncodingError,
    DVRowIndexError,
    DVSizeMismatchError,
    LogError,
)

STORAGE_UUID = "u"
STORAGE_INLINE = "i"
STORAGE_PATH = "p"
STORAGE_TYPES = (STORAGE_UUID, STORAGE_INLINE, STORAGE_PATH)


@dataclass(frozen=True)
class DeletionVectorDescriptor:
    """The `deletionVector` struct of an add or remove action (PROTOCOL.md schema)."""

    storage_type: str
    path_or_inline_dv: str
    offset: int | None
    size_in_bytes: int
    cardinality: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> DeletionVectorDescriptor:
        """Build a descriptor from the log's camelCase mapping; LogError if malformed."""
        storage_type = _required(d, "storageType")
        if storage_type not in STORAGE_TYPES:
            raise LogError(
                f"deletion vector storageType must be one of 'u', 'i', 'p', got {storage_type!r}"
            )
        descriptor = cls(
            storage_type=storage_type,
            path_or_inline_dv=_required(d, "pathOrInlineDv"),
            offset=_optional_count(d, "offset"),
            size_in_bytes=_count(d, "sizeInBytes"),
            cardinality=_count(d, "cardinality"),
        )
        descriptor._check_path()
        return descriptor

    def _check_path(self) -> None:
        """Reject a path field that cannot name a DV (empty, or a 'u' without a UUID)."""
        if not self.path_or_inline_dv:
            raise LogError("deletion vector pathOrInlineDv is empty")
        if self.is_relative:
            try:
                z85.uuid_from_z85(self.path_or_inline_dv[-z85.ENCODED_UUID_LENGTH :])
            except ValueError as exc:
                raise LogError(
                    f"deletion vector pathOrInlineDv {self.path_or_inline_dv!r} does not end"
                    f" in a Z85-encoded UUID: {exc}"
                ) from exc

    def to_json(self) -> dict[str, Any]:
        """The log's camelCase mapping; `offset` is left out when it is None."""
        out: dict[str, Any] = {
            "storageType": self.storage_type,
            "pathOrInlineDv": self.path_or_inline_dv,
        }
        if self.offset is not None:
            out["offset"] = self.offset
        out["sizeInBytes"] = self.size_in_bytes
        out["cardinality"] = self.cardinality
        return out

    @property
    def unique_id(self) -> str:
        """`<storageType><pathOrInlineDv>[@<offset>]`: tells a file's successive DVs apart."""
        base = f"{self.storage_type}{self.path_or_inline_dv}"
        return base if self.offset is None else f"{base}@{self.offset}"

    @property
    def is_inline(self) -> bool:
        """True when the rows are stored in the log itself ('i')."""
        return self.storage_type == STORAGE_INLINE

    @property
    def is_relative(self) -> bool:
        """True when the DV file is named by a UUID relative to the table root ('u')."""
        return self.storage_type == STORAGE_UUID

    @property
    def is_absolute_path(self) -> bool:
        """True when `path_or_inline_dv` is the DV file's own (absolute) path ('p')."""
        return self.storage_type == STORAGE_PATH

    @property
    def effective_offset(self) -> int:
        """The offset of the DV in its file; an absent offset means 0."""
        return self.offset or 0

    @property
    def prefix(self) -> str:
        """The optional random directory prefix of a 'u' DV (text before the UUID)."""
        self._require(STORAGE_UUID)
        return self.path_or_inline_dv[: -z85.ENCODED_UUID_LENGTH]

    @property
    def uuid(self) -> UUID:
        """The UUID that names a 'u' DV file (the last 20 characters, Z85-decoded)."""
        self._require(STORAGE_UUID)
        return z85.uuid_from_z85(self.path_or_inline_dv[-z85.ENCODED_UUID_LENGTH :])

    def relative_path(self) -> str:
        """The file of a 'u' DV relative to the table root.

        That is `<prefix>/deletion_vector_<uuid>.bin`, or without the directory when the
        prefix is empty; the UUID is in canonical lowercase form.
        """
        name = f"deletion_vector_{self.uuid}.bin"
        return f"{self.prefix}/{name}" if self.prefix else name

    def inline_bytes(self) -> bytes:
        """The magic-prefixed bitmap bytes of an 'i' DV, with Z85 padding removed.

        Delta Spark pads to 4 bytes with zeros (so up to 3 extra decoded bytes are cut off);
        text from the Rust `z85` crate (e.g. delta-kernel-rs's golden cdf-table-with-dv) uses
        its '#' tail padding instead, which decodes to exactly `size_in_bytes` bytes.
        """
        self._require(STORAGE_INLINE)
        try:
            decoded = z85.decode_padded(self.path_or_inline_dv)
        except ValueError as exc:
            raise DVEncodingError(f"inline DV is not valid Z85: {exc}") from exc
        if not self.size_in_bytes <= len(decoded) < self.size_in_bytes + 4:
            raise DVSizeMismatchError(
                expected=f"{self.size_in_bytes} bytes",
                actual=f"{len(decoded)} decoded bytes",
            )
        return decoded[: self.size_in_bytes]

    def _require(self, storage_type: str) -> None:
        """Guard accessors that only make sense for one storage type."""
        if self.storage_type != storage_type:
            raise ValueError(
                f"deletion vector has storageType {self.storage_type!r}, not {storage_type!r}"
            )


def _required(d: Mapping[str, Any], key: str) -> str:
    """Fetch a mandatory string field of a descriptor or raise LogError."""
    value = d.get(key)
    if not isinstance(value, str):
        raise LogError(f"deletion vector {key} must be a string, got {value!r}")
    return value


def _count(d: Mapping[str, Any], key: str) -> int:
    """Fetch a mandatory non-negative integer field of a descriptor or raise LogError."""
    value = d.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise LogError(f"deletion vector {key} must be a non-negative integer, got {value!r}")


def _optional_count(d: Mapping[str, Any], key: str) -> int | None:
    """Like `_count`, but an absent or null field is None."""
    return None if d.get(key) is None else _count(d, key)


def validate_bitmap(
    bitmap: BitMap64, descriptor: DeletionVectorDescriptor, num_records: int | None
) -> None:
    """Check a decoded DV against its descriptor and, if known, its file's row count."""
    if len(bitmap) != descriptor.cardinality:
        raise DVCardinalityError(expected=descriptor.cardinality, actual=len(bitmap))
    if num_records is not None and bitmap and bitmap.max() >= num_records:
        raise DVRowIndexError(
            expected=f"row indexes < numRecords ({num_records})", actual=bitmap.max()
        )


def decode_inline(descriptor: DeletionVectorDescriptor) -> BitMap64:
    """Decode an inline ('i') DV: its Z85 text holds bare bitmap bytes, no size or CRC."""
    return deserialize_bitmap(descriptor.inline_bytes())


def descriptor_for_inline(bitmap: BitMap64) -> DeletionVectorDescriptor:
    """Describe `bitmap` as an inline DV, zero-padded to 4 bytes as Delta Spark writes it."""
    payload = serialize_bitmap(bitmap)
    padded = payload + bytes(-len(payload) % 4)
    return DeletionVectorDescriptor(
        storage_type=STORAGE_INLINE,
        path_or_inline_dv=z85.encode(padded),
        offset=None,
        size_in_bytes=len(payload),
        cardinality=len(bitmap),
    )


def new_uuid_path(value: UUID, prefix: str = "") -> str:
    """The `pathOrInlineDv` of a 'u' DV: optional prefix, then the Z85 of the UUID."""
    return prefix + z85.uuid_to_z85(value)
