"""A real S3-API server for tests: moto in server mode, as a subprocess speaking HTTP on 127.0.0.1.

Tests talk to it through boto3 exactly as they would to MinIO or AWS (``endpoint_url``); nothing is patched
in-process. Import the fixtures into a test module to use them::

    from tests.support.s3_server import s3_bucket, s3_endpoint  # noqa: F401

``s3_endpoint`` (session scope) starts one server per importing module and stops it at the end of the run;
``s3_bucket`` (function scope) sets dummy AWS credentials for the test and creates a fresh, uniquely named bucket,
so tests never see each other's objects.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.ports import free_port

DUMMY_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
"""Credentials the server accepts (moto does not check them) and a region; never real ones."""

START_TIMEOUT_S = 30.0


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status < 500
    except urllib.error.HTTPError as exc:
        # Any HTTP answer means the server is up; only connection errors mean "not yet".
        return exc.code < 500
    except (urllib.error.URLError, OSError):
        return False


def _start(log: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            # Most likely the port was taken between free_port() and the bind; the caller retries.
            return proc, ""
        if _answers(f"{url}/moto-api/"):
            return proc, url
        time.sleep(0.1)
    _stop(proc)
    raise RuntimeError(f"moto server on {url} did not answer within {START_TIMEOUT_S:.0f}s; log: {log}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextlib.contextmanager
def running_s3_server(attempts: int = 3) -> Iterator[str]:
    """Run ``python -m moto.server`` on a free 127.0.0.1 port for the duration of the block.

    Args:
        attempts: How many ports to try when the server exits at start (a port taken in the meantime).

    Yields:
        The endpoint URL, e.g. ``http://127.0.0.1:50123``.

    Raises:
        RuntimeError: The server did not come up; the message names its log file.
    """
    log = Path(tempfile.mkstemp(prefix="moto-server-", suffix=".log")[1])
    env = {**os.environ, **DUMMY_AWS_ENV}
    for _ in range(attempts):
        proc, url = _start(log, env)
        if url:
            break
    else:
        raise RuntimeError(f"moto server exited at start {attempts} times; log: {log}\n{log.read_text()[-2000:]}")
    try:
        yield url
    finally:
        _stop(proc)
        log.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The endpoint URL of a moto S3 server running for the whole test session."""
    with running_s3_server() as url:
        yield url


@dataclass(frozen=True)
class S3Bucket:
    """A fresh bucket on the test server."""

    endpoint: str
    name: str

    def uri(self, path: str = "") -> str:
        """``s3://<bucket>/<path>``."""
        return f"s3://{self.name}/{path}"

    def client(self):
        """A boto3 S3 client for the server, independent of the code under test."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint)


@pytest.fixture()
def s3_bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> S3Bucket:
    """Dummy AWS credentials in the environment for this test, and an empty bucket of its own."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    for name, value in DUMMY_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    # Keep a developer's ~/.aws config (profiles, retry modes, proxies) out of the tests.
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    bucket = S3Bucket(s3_endpoint, f"test-{uuid.uuid4().hex[:16]}")
    bucket.client().create_bucket(Bucket=bucket.name)
    return bucket
