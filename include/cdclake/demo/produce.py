"""Produce the demo's generated Debezium stream to Kafka topics, as the connector would have, for Kafka landing.

    python -m cdclake.demo.produce --bootstrap localhost:9094 [--partitions 3] [--seed 7] [--batches 4]
    cdclake apply --format debezium --kafka localhost:9094 --topics demo.public.customers,demo.public.orders --lake DIR

Topics (``demo.public.customers``, ``demo.public.orders``) are created when missing. Each message keeps its key,
value (null for tombstones) and headers; the producer's default partitioner keeps one key on one partition, so
per-key order holds, as with Debezium's producers. ``--batches`` only decides how the stream is generated; every
message is produced, in commit order.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any, Iterable, Sequence

from cdclake.exceptions import InputError

log = logging.getLogger(__name__)


def produce_lines(bootstrap: str, lines: Iterable[str], *, partitions: int = 3,
                  producer_config: dict[str, Any] | None = None) -> dict[str, int]:
    """Produce ``kcat -C -J`` envelopes (the demo generator's framing) to their topics.

    Args:
        bootstrap: Bootstrap servers.
        lines: The envelopes, in commit order.
        partitions: Partitions of topics this creates.
        producer_config: Extra confluent-kafka producer settings (security, batching).

    Returns:
        Messages produced per topic.

    Raises:
        InputError: The broker refused a topic or a message.
    """
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    docs = [json.loads(line) for line in lines]
    topics = sorted({d["topic"] for d in docs})
    config = {"bootstrap.servers": bootstrap, **(producer_config or {})}
    admin = AdminClient({k: v for k, v in config.items() if k == "bootstrap.servers" or
                         k.startswith(("security.", "sasl.", "ssl."))})
    existing = admin.list_topics(timeout=30).topics
    missing = [t for t in topics if t not in existing]
    if missing:
        for topic, future in admin.create_topics([NewTopic(t, num_partitions=partitions, replication_factor=1)
                                                  for t in missing]).items():
            try:
                future.result(timeout=30)
            except KafkaException as exc:
                raise InputError(f"kafka {bootstrap}: cannot create topic {topic}: {exc}") from exc
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(config)
    counts: dict[str, int] = {}
    for doc in docs:
        raw = doc.get("headers") or []
        pairs = list(zip(raw[0::2], raw[1::2])) if isinstance(raw, list) else list(raw.items())
        while True:
            try:
                producer.produce(doc["topic"], key=None if doc.get("key") is None else doc["key"].encode("utf-8"),
                                 value=None if doc.get("payload") is None else doc["payload"].encode("utf-8"),
                                 headers=[(k, None if v is None else str(v).encode("utf-8")) for k, v in pairs] or None,
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        counts[doc["topic"]] = counts.get(doc["topic"], 0) + 1
    left = producer.flush(60)
    if left or errors:
        raise InputError(f"kafka {bootstrap}: {left} message(s) undelivered, errors: {'; '.join(errors[:3])}")
    for topic, n in sorted(counts.items()):
        log.info("produced %d message(s) to %s", n, topic)
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    """Generate the demo stream and produce it; prints messages per topic as JSON."""
    from cdclake.demo.generator import generate

    parser = argparse.ArgumentParser(prog="python -m cdclake.demo.produce", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers host:port[,...]")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the topics created")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--batches", type=int, default=4)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stream = generate(args.seed, batches=args.batches)
    try:
        counts = produce_lines(args.bootstrap, [line for batch in stream.batches for line in batch],
                               partitions=args.partitions)
    except InputError as exc:
        sys.stderr.write(f"cdclake.demo.produce: error: {exc}\n")
        return 2
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
