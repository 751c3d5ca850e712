"""Where input objects come from and where outputs go: local paths, or s3:// through boto3 (local Batch Transform's
jobs, and the runtime API's asynchronous invocations).

Inputs (S3DataType):
  * S3Prefix: every object whose key starts with the prefix, as a raw string prefix (`s3://b/test` also takes
    `test_2/x.csv`), in key order; keys ending in `/` (folder markers) are skipped. A local folder gives every
    file under it (recursively), a local file itself, any other local path every file whose path starts with it.
  * ManifestFile: a JSON array whose first element is {"prefix": "<s3:// or local prefix>"}; every other
    element is a key relative to it. The manifest itself is never sent.
Output names: `<output path>/<R>.out`, where R is the input key relative to the S3Uri prefix (a leading `/`
removed), or the key's base name when the key is the prefix itself; for a manifest, R is the entry ([INF]).
Outputs are written to a temporary file and only renamed (local) or uploaded (S3) once every record of the object
succeeded; a failed object leaves no output, and no temporary file (an output an earlier run left is not deleted,
as SageMaker does not). Outputs are never compressed: `a.csv.gz` gives `a.csv.gz.out` [INF].
The S3 client honours the usual AWS settings (credentials, region, AWS_ENDPOINT_URL) and an explicit endpoint URL.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any


class SourceError(ValueError):
    """The job's input cannot be listed (nothing found, unreadable manifest); the message is SageMaker-style."""


@dataclass(frozen=True)
class InputObject:
    location: str  # s3://bucket/key or a local path
    name: str  # R: the output is <output path>/<name>.out
    size: int | None  # stored size, when listed

    @property
    def label(self) -> str:
        """How SageMaker's log lines name the object: bucket/key (or the local path)."""
        return self.location[len("s3://") :] if self.location.startswith("s3://") else self.location


def split_s3_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://") :].partition("/")
    return bucket, key


def relative_name(key: str, prefix: str, sep: str = "/") -> str:
    if key == prefix:
        return key.rsplit(sep, 1)[-1]
    rest = key[len(prefix) :]
    return rest[1:] if rest.startswith(sep) else rest


class Storage:
    """Reads inputs and writes outputs; the boto3 client is made on first use, once (clients are thread-safe; making
    one from boto3's default session is not, so the first use takes a lock, and later ones none)."""

    def __init__(self, s3_endpoint_url: str | None = None):
        self.s3_endpoint_url = s3_endpoint_url
        self._s3: Any = None
        self._making_s3 = threading.Lock()

    @property
    def s3(self) -> Any:
        if self._s3 is None:
            with self._making_s3:
                if self._s3 is None:
                    import boto3  # only jobs that use s3:// pay for importing boto3

                    self._s3 = boto3.client("s3", endpoint_url=self.s3_endpoint_url)
        return self._s3

    # ----- inputs -----

    def list_inputs(self, uri: str, data_type: str) -> list[InputObject]:
        objects = self._manifest(uri) if data_type == "ManifestFile" else self._prefix(uri)
        if not objects:
            raise SourceError(f'No S3 objects found under S3 URL "{uri}" given in input data source')
        return objects

    def _prefix(self, uri: str) -> list[InputObject]:
        if uri.startswith("s3://"):
            from botocore.exceptions import BotoCoreError, ClientError

            bucket, prefix = split_s3_uri(uri)
            objects = []
            try:
                for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                    for item in page.get("Contents", []):
                        key = item["Key"]
                        if not key.endswith("/"):
                            objects.append(
                                InputObject(f"s3://{bucket}/{key}", relative_name(key, prefix), item["Size"])
                            )
            except (BotoCoreError, ClientError) as exc:
                raise SourceError(f"Unable to list the input {uri}: {exc}") from None
            return objects
        path = Path(uri)
        if path.is_file():
            return [InputObject(str(path), path.name, path.stat().st_size)]
        root, prefix = (path, str(path)) if path.is_dir() else (path.parent, uri)
        if not root.is_dir():
            return []
        files = sorted(str(p) for p in root.rglob("*") if p.is_file() and str(p).startswith(prefix))
        return [InputObject(f, relative_name(f, prefix, os.sep), os.path.getsize(f)) for f in files]

    def _manifest(self, uri: str) -> list[InputObject]:
        try:
            entries = json.loads(self.read(uri))
        except (OSError, ValueError) as exc:
            raise SourceError(f"Unable to read the manifest file {uri}: {exc}") from None
        if not (
            isinstance(entries, list)
            and entries
            and isinstance(entries[0], dict)
            and isinstance(entries[0].get("prefix"), str)
            and all(isinstance(entry, str) for entry in entries[1:])
        ):
            raise SourceError(
                f'Invalid manifest file {uri}: expected a JSON array [{{"prefix": "s3://bucket/'
                f'prefix/"}}, "relative/key", ...]'
            )
        prefix = entries[0]["prefix"]
        if prefix.startswith("file://"):
            prefix = prefix[len("file://") :]
        return [InputObject(prefix + entry, entry, None) for entry in entries[1:]]

    def read(self, location: str) -> bytes:
        if location.startswith("s3://"):
            bucket, key = split_s3_uri(location)
            from botocore.exceptions import BotoCoreError, ClientError

            try:
                return self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            except (BotoCoreError, ClientError) as exc:
                raise OSError(f"Unable to read s3://{bucket}/{key}: {exc}") from None
        return Path(location).read_bytes()

    def read_input(self, obj: InputObject, compression: str | None) -> tuple[bytes, int]:
        """The object's bytes (decompressed when CompressionType is Gzip) and its stored size; OSError says why
        it cannot be read."""
        body = self.read(obj.location)
        if compression == "Gzip":
            try:
                return gzip.decompress(body), len(body)
            except (OSError, EOFError, zlib.error) as exc:
                raise OSError(f"Unable to decompress the object as Gzip: {exc}") from None
        return body, len(body)

    # ----- outputs -----

    def output_location(self, output_path: str, name: str) -> str:
        if output_path.startswith("s3://"):
            bucket, prefix = split_s3_uri(output_path)
            key = f"{prefix.rstrip('/')}/{name}.out" if prefix.strip("/") else f"{name}.out"
            return f"s3://{bucket}/{key}"
        return str(Path(output_path) / f"{name}.out")

    def open_output(self, location: str) -> PendingOutput:
        if location.startswith("s3://"):
            bucket, key = split_s3_uri(location)
            handle = tempfile.NamedTemporaryFile(prefix="transform-", suffix=".out", delete=False)
            return PendingOutput(handle, lambda path: self._upload(path, bucket, key))
        target = Path(location)
        target.parent.mkdir(parents=True, exist_ok=True)
        handle = tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp", delete=False)
        return PendingOutput(handle, lambda path: os.replace(path, target))

    def _upload(self, path: str, bucket: str, key: str) -> None:
        try:
            self.s3.upload_file(path, bucket, key)
        finally:
            os.unlink(path)


class PendingOutput:
    """An output being written: `commit()` publishes it whole, `discard()` leaves nothing behind."""

    def __init__(self, handle: IO[bytes], publish: Callable[[str], None]):
        self.handle = handle
        self.publish = publish
        self.size = 0

    def write(self, data: bytes) -> None:
        self.handle.write(data)
        self.size += len(data)

    def commit(self) -> None:
        self.handle.close()
        self.publish(self.handle.name)

    def discard(self) -> None:
        self.handle.close()
        try:
            os.unlink(self.handle.name)
        except FileNotFoundError:
            pass
