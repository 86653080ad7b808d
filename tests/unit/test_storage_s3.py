"""cdclake.storage against a real S3-API server over HTTP (moto in server mode) and a real directory.

Every behaviour is checked on both stores with the same test. The oracle is never the store under test: objects
are looked up with an independent boto3 client (S3) or read straight off the disk (local), and expected keys and
bytes are literals of the test.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from cdclake.exceptions import StorageError
from cdclake.storage import LocalStore, ObjectStore, S3Store, open_store
from tests.support.ports import free_port
from tests.support.s3_server import S3Bucket

PAYLOAD = "{\"name\": \"Zoë\", \"note\": \"ünïcödé €\"}\n".encode("utf-8")


@dataclass
class Case:
    """A store under test, plus independent access to where its objects really live."""

    kind: str
    store: ObjectStore
    raw_get: Callable[[str], bytes | None]
    """Read an object by its key under the store's root without the store (None when absent)."""
    put_beside: Callable[[str, bytes], None]
    """Write an object next to the store's root (``<parent of root>/<path>``), outside the store."""


def _local_case(tmp_path: Path) -> Case:
    parent = tmp_path / "lake"
    root = parent / "prefix"
    root.mkdir(parents=True)

    def raw_get(key: str) -> bytes | None:
        path = root / key
        return path.read_bytes() if path.is_file() else None

    def put_beside(path: str, data: bytes) -> None:
        target = parent / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    return Case("local", LocalStore(str(root)), raw_get, put_beside)


def _s3_case(bucket: S3Bucket) -> Case:
    client = bucket.client()

    def raw_get(key: str) -> bytes | None:
        try:
            return client.get_object(Bucket=bucket.name, Key=f"lake/prefix/{key}")["Body"].read()
        except client.exceptions.NoSuchKey:
            return None

    def put_beside(path: str, data: bytes) -> None:
        client.put_object(Bucket=bucket.name, Key=f"lake/{path}", Body=data)

    return Case("s3", S3Store(bucket.uri("lake/prefix"), endpoint_url=bucket.endpoint), raw_get, put_beside)


@pytest.fixture(params=["local", "s3"])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Case:
    if request.param == "local":
        return _local_case(tmp_path)
    return _s3_case(request.getfixturevalue("s3_bucket"))


def test_write_then_read_round_trips_bytes(case: Case) -> None:
    assert case.store.write_bytes("a/b/c.json", PAYLOAD) is True

    assert case.raw_get("a/b/c.json") == PAYLOAD
    assert case.store.read_bytes("a/b/c.json") == PAYLOAD
    assert case.store.exists("a/b/c.json")
    assert not case.store.exists("a/b/missing.json")


def test_plain_write_replaces_an_object(case: Case) -> None:
    case.store.write_bytes("k", b"first")
    assert case.store.write_bytes("k", b"second") is True
    assert case.raw_get("k") == b"second"


def test_empty_object(case: Case) -> None:
    case.store.write_bytes("claims/00000001", b"", if_absent=True)
    assert case.raw_get("claims/00000001") == b""
    assert case.store.exists("claims/00000001")
    assert case.store.read_bytes("claims/00000001") == b""


def test_write_if_absent_writes_once_and_never_overwrites(case: Case) -> None:
    assert case.store.write_bytes("manifests/00000001.json", b"winner", if_absent=True) is True
    assert case.store.write_bytes("manifests/00000001.json", b"loser", if_absent=True) is False
    assert case.raw_get("manifests/00000001.json") == b"winner"


def test_write_if_absent_refuses_a_key_written_plainly(case: Case) -> None:
    case.store.write_bytes("landed/x.json", b"plain")
    assert case.store.write_bytes("landed/x.json", b"conditional", if_absent=True) is False
    assert case.raw_get("landed/x.json") == b"plain"


def test_list_returns_sorted_keys_relative_to_the_root(case: Case) -> None:
    for key in ("b/2", "c", "a/1", "b/10", "a/sub/z"):
        case.store.write_bytes(key, key.encode())

    assert list(case.store.list()) == ["a/1", "a/sub/z", "b/10", "b/2", "c"]
    assert list(case.store.list("b/")) == ["b/10", "b/2"]
    assert list(case.store.list("a/sub/")) == ["a/sub/z"]
    assert list(case.store.list("nothing/")) == []


def test_list_of_an_empty_store_is_empty(case: Case) -> None:
    assert list(case.store.list()) == []


def test_list_ignores_a_sibling_whose_name_starts_like_the_root(case: Case) -> None:
    # The root is <parent>/prefix; <parent>/prefix2/... and <parent>/prefix.bak share its leading characters.
    case.put_beside("prefix2/other", b"x")
    case.put_beside("prefix.bak", b"x")
    case.store.write_bytes("mine", b"y")

    assert list(case.store.list()) == ["mine"]


def test_local_copy_is_a_local_file_with_the_object_bytes(case: Case) -> None:
    case.store.write_bytes("batches/00000001/part-00000.jsonl", PAYLOAD)

    path = case.store.local_copy("batches/00000001/part-00000.jsonl")

    assert isinstance(path, Path)
    assert path.is_file()
    assert path.read_bytes() == PAYLOAD
    assert path.name == "part-00000.jsonl"


def test_reading_a_missing_key_raises_storage_error_naming_it(case: Case) -> None:
    with pytest.raises(StorageError) as info:
        case.store.read_bytes("no/such/key.json")
    assert case.store.uri("no/such/key.json") in str(info.value)


def test_local_copy_of_a_missing_key_raises_storage_error(case: Case) -> None:
    with pytest.raises(StorageError) as info:
        case.store.local_copy("no/such/part.jsonl")
    assert case.store.uri("no/such/part.jsonl") in str(info.value)


def test_uri_names_the_object_location(case: Case, tmp_path: Path) -> None:
    if case.kind == "s3":
        bucket = case.store.bucket  # type: ignore[attr-defined]
        assert case.store.uri("manifests/1.json") == f"s3://{bucket}/lake/prefix/manifests/1.json"
    else:
        assert case.store.uri("manifests/1.json") == str(tmp_path / "lake" / "prefix" / "manifests" / "1.json")


# --- S3 specifics ---------------------------------------------------------------------------------------------


def test_s3_objects_land_under_the_root_prefix(s3_bucket: S3Bucket) -> None:
    store = S3Store(s3_bucket.uri("raw/orders/"), endpoint_url=s3_bucket.endpoint)
    store.write_bytes("manifests/00000001.json", b"{}", if_absent=True)
    store.write_bytes("batches/00000001/part-00000.jsonl", b"")

    listed = s3_bucket.client().list_objects_v2(Bucket=s3_bucket.name)["Contents"]
    assert sorted(o["Key"] for o in listed) == [
        "raw/orders/batches/00000001/part-00000.jsonl",
        "raw/orders/manifests/00000001.json",
    ]


def test_s3_store_at_the_bucket_root(s3_bucket: S3Bucket) -> None:
    store = S3Store(s3_bucket.uri(), endpoint_url=s3_bucket.endpoint)
    store.write_bytes("x/y", b"1")
    assert store.uri("x/y") == f"s3://{s3_bucket.name}/x/y"
    assert list(store.list()) == ["x/y"]
    assert s3_bucket.client().get_object(Bucket=s3_bucket.name, Key="x/y")["Body"].read() == b"1"


def test_s3_list_skips_folder_markers(s3_bucket: S3Bucket) -> None:
    # Consoles and some tools create zero-byte "folder/" objects; they are not files of the store.
    client = s3_bucket.client()
    client.put_object(Bucket=s3_bucket.name, Key="inbox/", Body=b"")
    client.put_object(Bucket=s3_bucket.name, Key="inbox/sub/", Body=b"")
    client.put_object(Bucket=s3_bucket.name, Key="inbox/sub/a.json", Body=b"{}")
    store = S3Store(s3_bucket.uri("inbox"), endpoint_url=s3_bucket.endpoint)

    assert list(store.list()) == ["sub/a.json"]


def test_s3_list_pages_through_more_than_a_thousand_keys(s3_bucket: S3Bucket) -> None:
    client = s3_bucket.client()
    expected = [f"claims/{i:08d}" for i in range(1, 1102)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda key: client.put_object(Bucket=s3_bucket.name, Key=f"raw/{key}", Body=b""), expected))
    store = S3Store(s3_bucket.uri("raw"), endpoint_url=s3_bucket.endpoint)

    assert list(store.list("claims/")) == expected


def test_s3a_scheme_is_accepted(s3_bucket: S3Bucket) -> None:
    store = open_store(f"s3a://{s3_bucket.name}/p", s3_endpoint=s3_bucket.endpoint)
    assert isinstance(store, S3Store)
    store.write_bytes("k", b"v")
    assert store.uri("k") == f"s3://{s3_bucket.name}/p/k"
    assert s3_bucket.client().get_object(Bucket=s3_bucket.name, Key="p/k")["Body"].read() == b"v"


@pytest.mark.parametrize("operation", ["read", "write", "write_if_absent", "list"])
def test_s3_errors_on_a_missing_bucket_raise_storage_error_naming_the_uri(
    s3_bucket: S3Bucket, operation: str
) -> None:
    store = S3Store("s3://no-such-bucket-cdclake/p", endpoint_url=s3_bucket.endpoint)
    with pytest.raises(StorageError) as info:
        if operation == "read":
            store.read_bytes("k")
        elif operation == "write":
            store.write_bytes("k", b"v")
        elif operation == "write_if_absent":
            store.write_bytes("k", b"v", if_absent=True)
        else:
            list(store.list("claims/"))
    assert "s3://no-such-bucket-cdclake/p/" in str(info.value)
    assert "NoSuchBucket" in str(info.value)


@pytest.mark.parametrize("operation", ["exists", "read", "write", "list"])
def test_s3_unreachable_endpoint_raises_storage_error(
    s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # fail at the first refused connection, no retry back-off
    store = S3Store(f"s3://{s3_bucket.name}/p", endpoint_url=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(StorageError) as info:
        if operation == "exists":
            store.exists("k")
        elif operation == "read":
            store.read_bytes("k")
        elif operation == "write":
            store.write_bytes("k", b"v")
        else:
            list(store.list())
    expected = f"s3://{s3_bucket.name}/p/" if operation == "list" else f"s3://{s3_bucket.name}/p/k"
    assert expected in str(info.value)


@pytest.mark.parametrize("location", ["s3://", "s3:///prefix", "gs://bucket/prefix"])
def test_s3_store_rejects_a_location_without_a_bucket(location: str) -> None:
    with pytest.raises(StorageError, match="is not an s3://bucket/prefix location"):
        S3Store(location)


# --- local specifics ------------------------------------------------------------------------------------------


def test_open_store_resolves_a_local_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("relative/raw")
    assert isinstance(store, LocalStore)
    assert store.root == str(tmp_path / "relative" / "raw")


def test_local_write_error_raises_storage_error_naming_the_path(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    store.write_bytes("batches", b"a file where a folder is needed")
    for if_absent in (False, True):
        with pytest.raises(StorageError) as info:
            store.write_bytes("batches/00000001/part-00000.jsonl", b"x", if_absent=if_absent)
        assert str(tmp_path / "batches" / "00000001" / "part-00000.jsonl") in str(info.value)


def test_local_list_hides_unfinished_temporary_files(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / ".tmp-abc123").write_bytes(b"half a manif")
    store.write_bytes("manifests/00000001.json", b"{}", if_absent=True)

    assert list(store.list("manifests/")) == ["manifests/00000001.json"]
    assert sorted(p.name for p in (tmp_path / "manifests").iterdir()) == [".tmp-abc123", "00000001.json"]


def test_local_conditional_writes_leave_no_temporary_files(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    assert store.write_bytes("claims/00000001", b"", if_absent=True) is True
    assert store.write_bytes("claims/00000001", b"again", if_absent=True) is False
    store.write_bytes("claims/00000002", b"plain")

    assert sorted(p.name for p in (tmp_path / "claims").iterdir()) == ["00000001", "00000002"]
    assert (tmp_path / "claims" / "00000001").read_bytes() == b""
