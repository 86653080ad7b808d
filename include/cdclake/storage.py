"""Object storage for inboxes and the raw zone: a local directory or an S3 prefix (boto3, custom endpoint).

Keys are ``/``-separated paths relative to the store's root. Writes that must happen once (batch manifests,
landed-file markers) use ``write_bytes(..., if_absent=True)``: a hard link of a complete temporary file locally
(atomic, fails if the name exists), ``If-None-Match: *`` on S3.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Protocol
from urllib.parse import urlparse

from cdclake.exceptions import StorageError


class ObjectStore(Protocol):
    """What cdclake needs of a storage location."""

    root: str

    def uri(self, key: str) -> str:
        """The absolute location of a key (a path or ``s3://`` URI)."""

    def exists(self, key: str) -> bool:
        """Whether an object exists at the key."""

    def read_bytes(self, key: str) -> bytes:
        """Read a whole object."""

    def write_bytes(self, key: str, data: bytes, *, if_absent: bool = False) -> bool:
        """Write an object; with ``if_absent``, write only if no object exists and return whether it wrote."""

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys under a prefix, in sorted order."""

    def local_copy(self, key: str) -> Path:
        """A local file path holding the object (the object itself for a local store)."""


@dataclass
class LocalStore:
    """A directory on the local file system."""

    root: str

    def _path(self, key: str) -> Path:
        return Path(self.root) / key

    def uri(self, key: str) -> str:
        return str(self._path(key))

    def exists(self, key: str) -> bool:
        return self._path(key).exists()

    def read_bytes(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except OSError as exc:
            raise StorageError(f"cannot read {self._path(key)}: {exc.strerror or exc}") from exc

    def write_bytes(self, key: str, data: bytes, *, if_absent: bool = False) -> bool:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Write a temporary file first, so no reader (and no later lander, after a crash) sees a partial object.
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                if if_absent:
                    # link() creates the name atomically and fails if it exists, like O_EXCL, but only ever
                    # publishes a complete file: a manifest (the commit point) can never be half written.
                    try:
                        os.link(tmp, path)
                    except FileExistsError:
                        return False
                else:
                    os.replace(tmp, path)
            finally:
                if os.path.lexists(tmp):
                    os.unlink(tmp)
            return True
        except OSError as exc:
            raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc

    def list(self, prefix: str = "") -> Iterator[str]:
        base = Path(self.root)
        start = base / prefix if prefix else base
        if start.is_file():
            yield prefix
            return
        if not start.exists():
            return
        keys = [
            p.relative_to(base).as_posix()
            for p in start.rglob("*")
            if p.is_file() and not p.name.startswith(".tmp-")
        ]
        yield from sorted(keys)

    def local_copy(self, key: str) -> Path:
        path = self._path(key)
        if not path.is_file():
            raise StorageError(f"cannot read {path}: no such file")
        return path


@dataclass
class S3Store:
    """An S3 bucket prefix, through boto3 (any S3 API: AWS, MinIO, moto with ``endpoint_url``)."""

    root: str
    endpoint_url: str | None = None
    _client: Any = field(default=None, init=False, repr=False)
    _cache_dir: Path | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        parsed = urlparse(self.root)
        if parsed.scheme not in ("s3", "s3a") or not parsed.netloc:
            raise StorageError(f"{self.root!r} is not an s3://bucket/prefix location")
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("s3", endpoint_url=self.endpoint_url)
        return self._client

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def exists(self, key: str) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise StorageError(f"cannot stat {self.uri(key)}: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot stat {self.uri(key)}: {exc}") from exc

    def read_bytes(self, key: str) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot read {self.uri(key)}: {exc}") from exc

    def write_bytes(self, key: str, data: bytes, *, if_absent: bool = False) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self._key(key), "Body": data}
        if if_absent:
            kwargs["IfNoneMatch"] = "*"
        try:
            self.client.put_object(**kwargs)
            return True
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if if_absent and code in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                return False
            raise StorageError(f"cannot write {self.uri(key)}: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot write {self.uri(key)}: {exc}") from exc

    def list(self, prefix: str = "") -> Iterator[str]:
        from botocore.exceptions import BotoCoreError, ClientError

        full = self._key(prefix)
        strip = len(self.prefix) + 1 if self.prefix else 0
        keys: list[str] = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full):
                # Keys ending in "/" are folder markers (zero-byte objects made by consoles and tools), not files.
                keys.extend(o["Key"][strip:] for o in page.get("Contents", []) if not o["Key"].endswith("/"))
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot list {self.uri(prefix)}: {exc}") from exc
        yield from sorted(keys)

    def local_copy(self, key: str) -> Path:
        if self._cache_dir is None:
            self._cache_dir = Path(tempfile.mkdtemp(prefix="cdclake-s3-"))
        target = self._cache_dir / key
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.read_bytes(key))
        return target


def open_store(location: str, *, s3_endpoint: str | None = None) -> ObjectStore:
    """Open a directory path or ``s3://bucket/prefix`` as an :class:`ObjectStore`."""
    if location.startswith(("s3://", "s3a://")):
        return S3Store(location, endpoint_url=s3_endpoint)
    return LocalStore(str(Path(location).expanduser().resolve()))
