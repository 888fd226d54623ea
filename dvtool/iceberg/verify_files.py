"""The pieces every `--verify` check of an Iceberg table shares: the problem record, the
errors an unreadable file raises, and the cheap existence, size and Parquet footer reads.

Files are read through the table's pyiceberg `FileIO` (local disk, S3, GCS, ADLS, as the
table's catalog configures it): `len(input_file)` is one HEAD (or stat), a Parquet footer
one or two range reads. Every error reading a file becomes an `IcebergProblem` naming the
file; none escapes as a traceback.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dvtool.errors import DvtoolError, exception_text

if TYPE_CHECKING:
    import pyarrow.parquet as pq
    from pyiceberg.io import FileIO, InputFile

READ_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    EOFError,
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    struct.error,
    pa.ArrowException,
    DvtoolError,
)
"""What reading a damaged or missing file raises, in pyarrow, pyiceberg's Avro decoder or
dvtool's codecs (ArrowInvalid and JSON errors are ValueErrors, ArrowIOError an OSError):
each becomes a problem, never a traceback."""


@dataclass(frozen=True)
class IcebergProblem:
    """One thing `--verify` found wrong: its kind (see `dvtool.iceberg.verify`), what and
    where, and the files it concerns as the manifests name them: the data file, and the
    delete file (a position or equality delete file, or the Puffin file of a DV)."""

    kind: str
    message: str
    data_file: str | None = None
    delete_file: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def describe(error: BaseException) -> str:
    """An exception as the tail of a problem message. A decoder's complaint about bytes it
    cannot read says only that: its byte and position come from past the damage (a
    truncated Avro file decodes whatever follows), so they are neither useful nor stable."""
    if isinstance(error, DvtoolError):
        return error.message
    if isinstance(error, UnicodeDecodeError):
        return "UnicodeDecodeError: damaged data (truncated, or not the file format it claims)"
    return f"{type(error).__name__}: {exception_text(error)}"


@dataclass(frozen=True)
class FileRef:
    """A file a manifest entry names, with what the manifest says of it; `kind` is
    `data-file` or `delete-file` (the prefix of its problem kinds)."""

    kind: str
    path: str
    size: int
    data_file: str | None
    delete_file: str | None

    def problem(self, suffix: str, message: str) -> IcebergProblem:
        return IcebergProblem(f"{self.kind}-{suffix}", message, self.data_file, self.delete_file)

    @property
    def what(self) -> str:
        return f"{self.kind.replace('-', ' ')} {self.path}"


def stat(io: FileIO, ref: FileRef) -> tuple[InputFile | None, list[IcebergProblem]]:
    """The file (one HEAD) and its size problem, or None and why it cannot be read:
    `-missing`, `-unreadable`, `-size` (against `file_size_in_bytes`)."""
    try:
        input_file = io.new_input(ref.path)
        size = len(input_file)
    except FileNotFoundError:
        return None, [ref.problem("missing", f"{ref.what} does not exist")]
    except READ_ERRORS as e:
        return None, [ref.problem("unreadable", f"cannot look up {ref.what}: {describe(e)}")]
    if size == ref.size:
        return input_file, []
    message = (
        f"{ref.what} has {size} bytes; its manifest entry's file_size_in_bytes says {ref.size}"
    )
    return input_file, [ref.problem("size", message)]


@contextmanager
def parquet_file(input_file: InputFile) -> Iterator[pq.ParquetFile]:
    """The Parquet file behind `input_file`, its footer read, for a with block (which
    closes the stream)."""
    import pyarrow.parquet as pq

    with input_file.open(seekable=True) as stream:
        yield pq.ParquetFile(stream)


def read_at(stream: Any, offset: int, length: int) -> bytes:
    """`length` bytes at `offset` (fewer at the end of the file)."""
    stream.seek(offset)
    return bytes(stream.read(length))
