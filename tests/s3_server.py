"""A moto S3 server on 127.0.0.1 for tests, with the options every client needs to reach it.

`moto_s3_server()` starts moto's `ThreadedMotoServer` on a free port of 127.0.0.1 in a
process of its own, creates one bucket, and stops the server and its process on exit. The
server runs in its own process, not in a thread of the test process, because some readers
(deltalake's `QueryBuilder`) hold the GIL while they wait for HTTP replies, which would starve
a server thread. Two things are added in front of moto's WSGI app:

- Writes are applied one at a time. moto checks `If-None-Match: *` and then stores the
  object in two steps, with its other request threads free to run in between, so two
  racing conditional PUTs could both succeed, which S3 never allows; serializing PUT, POST
  and DELETE requests gives S3's atomic conditional writes, which the race tests rely on.
- Every request is logged (`S3Request`: method, key, `Range` and `If-None-Match` headers,
  status), so tests can check how dvtool talked to S3 (ranged GETs for DVs, conditional PUTs
  for commits) whichever process sent the request. `GET /_requests` returns the log as JSON.

`S3Server` also gives the storage options of each client: dvtool's `--storage-option`s
(fsspec/s3fs keys), deltalake's `storage_options` (object_store keys), boto3, and uploading
or downloading a table prefix.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

import boto3

__all__ = ["BUCKET", "KEY_ID", "SECRET", "S3Request", "S3Server", "moto_s3_server"]

BUCKET = "dvtool-test"
KEY_ID = "test"
SECRET = "test"
REGION = "us-east-1"
START_TIMEOUT_S = 60
_LOG_PATH = "/_requests"
_WRITE_METHODS = frozenset({"PUT", "POST", "DELETE"})

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@dataclass(frozen=True)
class S3Request:
    """One request the server answered: `key` is the object key (no bucket), '' for a bucket;
    `prefix` the `prefix` a bucket listing asked for (None: no listing, or no prefix)."""

    method: str
    bucket: str
    key: str
    range: str | None
    if_none_match: str | None
    status: int
    prefix: str | None = None


class _RecordingApp:
    """WSGI middleware: serializes writes (atomic conditional PUTs) and logs every request."""

    def __init__(self, app: WsgiApp) -> None:
        self._app = app
        self._write_lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._requests: list[S3Request] = []

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO") == _LOG_PATH:
            return self._serve_log(start_response)
        status: list[int] = []

        def recording_start(code: str, headers: Any, *rest: Any) -> Any:
            status.append(int(code.split()[0]))
            return start_response(code, headers, *rest)

        if environ["REQUEST_METHOD"] in _WRITE_METHODS:
            with self._write_lock:
                body = list(self._app(environ, recording_start))
        else:
            body = list(self._app(environ, recording_start))
        self._record(environ, status[0] if status else 0)
        return body

    def _record(self, environ: dict[str, Any], status: int) -> None:
        bucket, _, key = unquote(environ.get("PATH_INFO", "")).lstrip("/").partition("/")
        request = S3Request(
            environ["REQUEST_METHOD"],
            bucket,
            key,
            environ.get("HTTP_RANGE"),
            environ.get("HTTP_IF_NONE_MATCH"),
            status,
            parse_qs(environ.get("QUERY_STRING", "")).get("prefix", [None])[0],
        )
        with self._log_lock:
            self._requests.append(request)

    def _serve_log(self, start_response: Callable[..., Any]) -> list[bytes]:
        with self._log_lock:
            data = json.dumps([asdict(r) for r in self._requests]).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [data]


def _serve(ready: Any, stop: Any) -> None:
    """The server process: run moto behind `_RecordingApp`, send the port, wait for `stop`."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    class QuietRequestHandler(MotoRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            """No line per request on stderr: `_RecordingApp` keeps the log."""

    class RecordingMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = _RecordingApp(DomainDispatcherApplication(create_backend_app))
            self._server = make_server(
                self._ip_address, self._port, app, True, request_handler=QuietRequestHandler
            )
            self._server_ready_event.set()
            self._server.serve_forever()

    server = RecordingMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        ready.send(server.get_host_and_port()[1])
        stop.wait()
    finally:
        server.stop()


@dataclass(frozen=True)
class S3Server:
    """A running moto server: its endpoint, its bucket, its request log, client options."""

    endpoint: str
    bucket: str = BUCKET

    def uri(self, prefix: str) -> str:
        """`s3://bucket/prefix`."""
        return f"s3://{self.bucket}/{prefix.strip('/')}"

    def storage_options(self) -> dict[str, str]:
        """dvtool's storage options (s3fs keys), as `--storage-option` would give them."""
        return {"endpoint_url": self.endpoint, "key": KEY_ID, "secret": SECRET}

    def cli_options(self) -> list[str]:
        """`--storage-option KEY=VALUE` arguments for the dvtool CLI."""
        options = self.storage_options().items()
        return [a for k, v in options for a in ("--storage-option", f"{k}={v}")]

    def delta_options(self) -> dict[str, str]:
        """deltalake's and polars' storage options (object_store keys) for this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        }

    def client(self) -> Any:
        """A boto3 S3 client for this server."""
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=KEY_ID,
            aws_secret_access_key=SECRET,
            region_name=REGION,
        )

    def upload(self, local: Path, prefix: str) -> str:
        """Put every file under the local directory `local` at `prefix`; returns its URI."""
        client = self.client()
        for path in sorted(p for p in local.rglob("*") if p.is_file()):
            key = f"{prefix.strip('/')}/{path.relative_to(local).as_posix()}"
            client.put_object(Bucket=self.bucket, Key=key, Body=path.read_bytes())
        return self.uri(prefix)

    def keys(self, prefix: str) -> list[str]:
        """The keys under `prefix/`, relative to it, sorted."""
        base = prefix.strip("/") + "/"
        paginator = self.client().get_paginator("list_objects_v2")
        pages = paginator.paginate(Bucket=self.bucket, Prefix=base)
        return sorted(o["Key"][len(base) :] for page in pages for o in page.get("Contents", []))

    def download(self, prefix: str, dest: Path) -> Path:
        """Copy every object under `prefix/` into the local directory `dest`; returns it."""
        client = self.client()
        for relative in self.keys(prefix):
            target = dest / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            body = client.get_object(Bucket=self.bucket, Key=f"{prefix.strip('/')}/{relative}")
            target.write_bytes(body["Body"].read())
        return dest

    def requests(self) -> list[S3Request]:
        """Every request the server answered so far, oldest first."""
        with urllib.request.urlopen(self.endpoint + _LOG_PATH, timeout=30) as reply:
            return [S3Request(**r) for r in json.loads(reply.read())]


def _port(receive: Any, process: Any) -> int:
    """The port the server process reports; RuntimeError if it dies or takes too long."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not receive.poll(0.1):
        if not process.is_alive():
            raise RuntimeError(f"the moto server process exited with code {process.exitcode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the moto server did not start within {START_TIMEOUT_S} s")
    return int(receive.recv())


@contextmanager
def moto_s3_server() -> Iterator[S3Server]:
    """A moto S3 server on 127.0.0.1 with the bucket `BUCKET`; stopped, process joined, on exit."""
    ctx = mp.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    stop = ctx.Event()
    process = ctx.Process(target=_serve, args=(send, stop), daemon=True)
    process.start()
    try:
        server = S3Server(f"http://127.0.0.1:{_port(receive, process)}")
        server.client().create_bucket(Bucket=server.bucket)
        yield server
    finally:
        stop.set()
        process.join(timeout=START_TIMEOUT_S)
        if process.is_alive():
            process.terminate()
            process.join()
