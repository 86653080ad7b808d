"""Landing from Kafka: topic offset ranges -> one raw micro-batch, exactly once into the raw zone.

A landing run:

1. **Plans** the batch on the driver: per partition of the configured topics (a list, or a regular expression
   matched against the broker's topic names), the range ``[start, end)`` from the offset after the last landed one
   (read from the manifests, the source of truth; a partition never landed starts at its low watermark) to the
   current high watermark, capped so the batch holds at most ``max_batch_records`` offsets. Nothing new: no
   batch, nothing written (the cheap skip).
2. **Commits the plan**: claims the next batch id and writes the batch manifest with the ranges *before* reading
   anything. The manifest lists one raw file per range, with deterministic names.
3. **Reads** the ranges in parallel as Spark tasks (one task per partition range). Each task assigns its
   partition at ``start`` with confluent-kafka, consumes until ``end`` and writes the raw records (same record
   shape as file landing, :data:`cdclake.landing.RAW_FIELDS`, framing ``kafka``) to its file (overwritten whole).
4. **Completes** the batch: ``kafka/complete/<batch id>.json`` records what each range held. Only then is the
   consumer group's committed offset moved (advisory, for lag monitoring; cdclake never reads it back).

A run that finds the newest Kafka manifest without its completion marker (the lander died) re-reads exactly that
manifest's ranges into the same files, so a crash at any point followed by a re-run lands every offset once.
Two landers racing on one source cannot plan overlapping batches: planning the successor of batch P needs the
put-if-absent token ``kafka/successor/<P>``, and the manifest itself is written put-if-absent.

Raw records from Kafka: ``input`` is ``kafka:<topic>/<partition>``, ``offset`` and ``timestamp`` (ms) are the
record's, ``headers`` an object of header name -> value, ``key``/``value`` the record's bytes as UTF-8 text
(byte-exact: valid UTF-8 decodes and re-encodes to the same bytes), null for a null key or a tombstone. Bytes that
are not UTF-8 are stored base64-encoded instead, and the record's extra field ``binary`` lists them (``key``,
``value``, ``header:<name>``), so nothing is ever altered silently; normalization then quarantines such a message.
A value of several concatenated JSON documents gets an ``error`` saying so, and is quarantined too: a record is one
message, and Spark's JSON reader would read its first document and drop the rest.

On a Spark cluster the tasks run on the executors: they need confluent-kafka and cdclake installed, a raw zone they
can reach (``s3://`` or a shared path) and S3 credentials in their own environment. The Kafka client settings,
including the security passthrough, travel with the tasks; they are never written to the raw zone or logged.

Known limits: with an open transaction on a topic, a range planned up to the high watermark waits for the last
stable offset (``isolation.level=read_committed``) and fails after ``timeout_s`` without progress; the batch stays
incomplete and the next run re-reads it. Offsets deleted by retention before they were landed are logged and listed
in the manifest (``lost_to_retention``); a planned range whose offsets are deleted before it is read fails the run.

Offsets that go backwards: when the lake has landed a partition further than the broker's high watermark, the topic
was deleted and recreated (or the partition lost records to an unclean leader election). By default
(``offset_reset="fail"``) the run stops before planning anything, naming the partitions and both offsets, so an
operator decides; ``offset_reset="earliest"`` lands those partitions again from their low watermark and lists the
reset in the manifest (``offset_resets``). Re-landing is safe for the tables: changes apply by source position,
never by offset, so a change seen twice is a no-op. Not detectable from offsets alone: a topic recreated and
refilled past the landed offset before the next run (its new offsets look like new records).

Test hook: the environment variable ``CDCLAKE_FAULT`` makes the landing process SIGKILL itself at one point, so
tests can crash it for real (never set it in production):

- ``after-manifest``: right after the manifest is written, before any range is read;
- ``mid-files``: when the first range's file is written (from inside its Spark task), while others may not be;
- ``before-commit``: after the completion marker, before the consumer-group commit.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import logging
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from cdclake import __version__, faults
from cdclake.exceptions import ConfigError, InputError, StorageError
from cdclake.landing import _next_batch_id, raw_store, record_documents_error
from cdclake.settings import LakeSettings
from cdclake.storage import ObjectStore, open_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

ENV_PREFIX = "CDCLAKE_KAFKA_"
FAULT_ENV = "CDCLAKE_FAULT"
FAULTS = ("after-manifest", "mid-files", "before-commit")
FRAMING = "kafka"
OFFSET_RESETS = ("fail", "earliest")
DEFAULT_MAX_BATCH_RECORDS = 1_000_000
_ORIGIN = "0" * 8  # the "previous batch" of a source's first Kafka batch
SECURITY_SETTING = re.compile(r"^(security\.protocol|sasl\..+|ssl\..+)$")
"""Client settings passed through from config, connections and the environment: security ones only."""


class KafkaLandingError(StorageError):
    """The broker did not deliver a planned offset range (deleted by retention, unreachable, timed out)."""


class OffsetRegressionError(InputError):
    """The lake landed a partition beyond its current high watermark: the topic was recreated or lost records."""


@dataclass(frozen=True)
class KafkaSource:
    """Where and how to read a Kafka source.

    Attributes:
        bootstrap: ``bootstrap.servers`` (``host:port[,host:port...]``).
        topics: Topic names to land (Debezium's ``<prefix>.<schema>.<table>``, a dtle SchemaChangeTopic, ...).
        pattern: Alternatively, a regular expression every topic name to land matches in full.
        group_id: Consumer group whose committed offsets mirror the landed ones (advisory, for lag monitoring).
        max_batch_records: At most this many offsets per batch, over all partitions.
        client_config: Security settings passed to the client as they are: ``security.protocol``, ``sasl.*``,
            ``ssl.*``. Not written to the raw zone or logs.
        timeout_s: How long a read may wait for the broker without progress before it fails.
        offset_reset: What to do when a partition's high watermark is below the offset the lake landed up to
            (the topic was recreated): ``fail`` (default; the run stops and says so) or ``earliest`` (land the
            partition again from its low watermark, recorded in the manifest).
    """

    bootstrap: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    group_id: str = "cdclake"
    max_batch_records: int = DEFAULT_MAX_BATCH_RECORDS
    client_config: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout_s: float = 60.0
    offset_reset: str = "fail"

    def __post_init__(self) -> None:
        if not self.bootstrap or not self.bootstrap.strip():
            raise ConfigError("kafka bootstrap servers are empty; expected host:port[,host:port...]")
        if bool(self.topics) == bool(self.pattern):
            raise ConfigError("kafka source needs exactly one of topics (a list of names) or pattern (a regex); "
                              f"got topics={list(self.topics)!r} pattern={self.pattern!r}")
        if self.pattern:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ConfigError(f"kafka topic pattern {self.pattern!r} is not a regular expression: {exc}") from exc
        if any(not t.strip() for t in self.topics):
            raise ConfigError(f"kafka topics {list(self.topics)!r} contain an empty name")
        if self.max_batch_records < 1:
            raise ConfigError(f"kafka max_batch_records={self.max_batch_records}: must be at least 1")
        if self.offset_reset not in OFFSET_RESETS:
            raise ConfigError(f"kafka offset_reset={self.offset_reset!r}: expected one of {', '.join(OFFSET_RESETS)}")
        for key in self.client_config:
            if not SECURITY_SETTING.match(key):
                raise ConfigError(f"kafka client setting {key!r} is not passed through: only security.protocol, "
                                  "sasl.* and ssl.* are (cdclake sets the others itself)")

    @classmethod
    def from_config(cls, bootstrap: str, *, topics: Iterable[str] | str | None = None, pattern: str | None = None,
                    group_id: str | None = None, max_batch_records: int | None = None,
                    client_config: Mapping[str, Any] | None = None, offset_reset: str | None = None,
                    env: Mapping[str, str] | None = None) -> "KafkaSource":
        """Build a source from config values (a source YAML, CLI flags, an Airflow connection's extras).

        Security settings come from ``client_config`` (e.g. an Airflow connection's ``extra``), overridden by
        ``CDCLAKE_KAFKA_*`` environment variables: the part after the prefix, lower-cased, with ``_`` read as
        ``.`` (``CDCLAKE_KAFKA_SASL_PASSWORD`` -> ``sasl.password``). ``CDCLAKE_KAFKA_GROUP_ID`` and
        ``CDCLAKE_KAFKA_MAX_BATCH_RECORDS`` are the defaults of the two arguments of the same names.

        Args:
            bootstrap: Bootstrap servers.
            topics: Topic names, as a list or comma-separated.
            pattern: A regular expression for topic names instead.
            group_id: Consumer group (default ``cdclake``).
            max_batch_records: Cap on the offsets of one batch.
            client_config: Security settings (``security.protocol``, ``sasl.*``, ``ssl.*``).
            offset_reset: ``fail`` (default) or ``earliest``, for partitions whose offsets went backwards.
            env: Environment to read (default ``os.environ``).

        Raises:
            ConfigError: A missing or invalid setting, named.
        """
        env = os.environ if env is None else env
        if isinstance(topics, str):
            topics = [t.strip() for t in topics.split(",") if t.strip()]
        config = {str(k): str(v) for k, v in (client_config or {}).items()}
        for name, value in env.items():
            if name.startswith(ENV_PREFIX) and name not in (f"{ENV_PREFIX}GROUP_ID", f"{ENV_PREFIX}MAX_BATCH_RECORDS"):
                key = name[len(ENV_PREFIX):].lower().replace("_", ".")
                if SECURITY_SETTING.match(key):
                    config[key] = value
        raw_max = max_batch_records if max_batch_records is not None else env.get(f"{ENV_PREFIX}MAX_BATCH_RECORDS")
        try:
            limit = int(raw_max) if raw_max is not None else DEFAULT_MAX_BATCH_RECORDS
        except ValueError as exc:
            raise ConfigError(f"{ENV_PREFIX}MAX_BATCH_RECORDS={raw_max!r} is not an integer") from exc
        return cls(bootstrap=bootstrap, topics=tuple(topics or ()), pattern=pattern,
                   group_id=group_id or env.get(f"{ENV_PREFIX}GROUP_ID") or "cdclake",
                   max_batch_records=limit, client_config=config, offset_reset=offset_reset or "fail")

    def consumer_config(self) -> dict[str, Any]:
        """confluent-kafka consumer settings: cdclake's own, plus the security passthrough."""
        return {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            # A planned offset that is gone (retention) must fail loudly, never silently skip or restart.
            "auto.offset.reset": "error",
            "isolation.level": "read_committed",
            # Each reading consumer is assigned one partition: let that partition fill a whole fetch (the default
            # 1 MiB per partition makes a lone partition take many more round trips than a multi-partition fetch).
            "max.partition.fetch.bytes": 8 * 1024 * 1024,
            **self.client_config,
        }


@dataclass(frozen=True)
class OffsetRange:
    """One partition's planned range ``[start, end)`` and where its raw records go."""

    topic: str
    partition: int
    start: int
    end: int
    high_watermark: int
    file_index: int
    raw_object: str

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "start": self.start, "end": self.end,
                "high_watermark": self.high_watermark, "file_index": self.file_index, "raw_object": self.raw_object}


@dataclass(frozen=True)
class KafkaLanding:
    """What one landing run did.

    Attributes:
        batch_id: The landed batch, or None when no partition had new offsets.
        created: True when this run wrote (or finished) the batch.
        resumed: True when the batch was planned by an earlier run that did not finish it.
        message_count: Records in the batch (offsets may be fewer than planned: compaction, transaction markers).
        manifest: Location of the batch manifest.
        lag: Per topic and partition (as a string), the high watermark minus the next offset to land, after this
            batch.
    """

    batch_id: str | None
    created: bool
    resumed: bool = False
    message_count: int = 0
    manifest: str | None = None
    lag: dict[str, dict[str, int]] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------------------
# Planning (driver)


def _manifests_newest_first(store: ObjectStore) -> list[str]:
    return sorted((k for k in store.list("manifests/") if k.endswith(".json")), reverse=True)


def latest_kafka_manifest(store: ObjectStore) -> dict[str, Any] | None:
    """The newest manifest of a source that landed from Kafka (other batches, e.g. quarantine replays, skipped)."""
    for key in _manifests_newest_first(store):
        manifest = json.loads(store.read_bytes(key))
        if "kafka" in manifest:
            return manifest
    return None


def _complete_key(batch_id: str) -> str:
    return f"kafka/complete/{batch_id}.json"


def landed_offsets(manifest: dict[str, Any] | None) -> dict[tuple[str, int], int]:
    """Next offset to land per (topic, partition), after a Kafka manifest (cumulative over all earlier ones)."""
    if manifest is None:
        return {}
    return {(t, int(p)): int(o) for t, parts in manifest["kafka"]["offsets"].items() for p, o in parts.items()}


def _admin_consumer(source: KafkaSource) -> Any:
    """The driver's consumer (metadata, watermarks, commits).

    Raises:
        ConfigError: The client rejects the settings (e.g. an unknown ``security.protocol``).
    """
    from confluent_kafka import Consumer, KafkaException

    try:
        return Consumer(source.consumer_config())
    except KafkaException as exc:
        raise ConfigError(f"kafka client settings for {source.bootstrap} are invalid: {exc}") from exc


def resolve_topics(source: KafkaSource, consumer: Any) -> dict[str, list[int]]:
    """Topic -> partition ids on the broker, for the source's topic list or pattern.

    Raises:
        InputError: A listed topic does not exist on the broker, or the metadata request failed.
    """
    from confluent_kafka import KafkaException

    try:
        metadata = consumer.list_topics(timeout=source.timeout_s)
    except KafkaException as exc:
        raise InputError(f"kafka {source.bootstrap}: cannot read topic metadata: {exc}") from exc
    if source.pattern:
        rx = re.compile(source.pattern)
        names = sorted(t for t in metadata.topics if not t.startswith("__") and rx.fullmatch(t))
    else:
        missing = [t for t in source.topics if t not in metadata.topics or metadata.topics[t].error is not None]
        if missing:
            raise InputError(f"kafka {source.bootstrap}: topic(s) {', '.join(missing)} do not exist")
        names = sorted(set(source.topics))
    return {t: sorted(metadata.topics[t].partitions) for t in names}


def _cap(lags: list[int], limit: int) -> list[int]:
    """Split ``limit`` offsets over partitions with these lags: every partition gets the same share, a share a
    partition cannot use goes to the others, and the remainder goes to the first partitions (deterministic)."""
    if sum(lags) <= limit:
        return list(lags)
    take = [0] * len(lags)
    left = limit
    open_ = [i for i, lag in enumerate(lags) if lag > 0]
    while left > 0 and open_:
        share = max(left // len(open_), 1)
        for i in list(open_):
            give = min(share, lags[i] - take[i], left)
            take[i] += give
            left -= give
            if take[i] == lags[i]:
                open_.remove(i)
            if left == 0:
                break
    return take


def watermarks(source: KafkaSource, consumer: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """(low, high) watermark per (topic, partition) of the source's topics.

    Raises:
        InputError: Topics missing or the broker not answering.
    """
    from confluent_kafka import KafkaException, TopicPartition

    marks: dict[tuple[str, int], tuple[int, int]] = {}
    for topic, partitions in resolve_topics(source, consumer).items():
        for partition in partitions:
            try:
                got = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=source.timeout_s)
            except KafkaException as exc:
                raise InputError(f"kafka {source.bootstrap}: watermarks of {topic}/{partition}: {exc}") from exc
            if got is None:
                raise InputError(f"kafka {source.bootstrap}: watermarks of {topic}/{partition} timed out")
            marks[(topic, partition)] = (int(got[0]), int(got[1]))
    return marks


Planned = tuple[str, int, int, int, int]
"""(topic, partition, start, end, high watermark) of one planned range."""


@dataclass(frozen=True)
class Plan:
    """A batch's plan.

    Attributes:
        planned: ``(topic, partition, start, end, high watermark)`` per partition with new offsets, in
            topic/partition order.
        lost: Offsets deleted by retention before they were landed, as ``{topic, partition, start, end}``.
        resets: Partitions landed again from their low watermark because their offsets went backwards, as
            ``{topic, partition, landed, low, high}`` (``landed``: the next offset the lake had).
    """

    planned: list[Planned]
    lost: list[dict[str, Any]]
    resets: list[dict[str, Any]]


def plan_ranges(source: KafkaSource, marks: dict[tuple[str, int], tuple[int, int]],
                landed: dict[tuple[str, int], int]) -> Plan:
    """Plan a batch's ranges from the landed offsets to the high watermarks, capped by the batch size.

    Args:
        source: The Kafka source (for the cap and the offset-reset policy).
        marks: (low, high) watermarks per partition (:func:`watermarks`).
        landed: Next offset to land per partition, from the manifests.

    Raises:
        OffsetRegressionError: A partition's high watermark is below the landed offset and the source's
            ``offset_reset`` is ``fail``.
    """
    wanted: list[tuple[str, int, int, int]] = []
    lost: list[dict[str, Any]] = []
    resets: list[dict[str, Any]] = []
    for (topic, partition), (low, high) in sorted(marks.items()):
        start = landed.get((topic, partition), low)
        if start > high:
            resets.append({"topic": topic, "partition": partition, "landed": start, "low": low, "high": high})
            start = low
        elif start < low:
            log.warning("%s/%d: offsets %d..%d were deleted by retention before they were landed",
                        topic, partition, start, low - 1)
            lost.append({"topic": topic, "partition": partition, "start": start, "end": low})
            start = low
        if high > start:
            wanted.append((topic, partition, start, high))
    if resets and source.offset_reset == "fail":
        where = "; ".join(f"{r['topic']}/{r['partition']}: landed up to offset {r['landed'] - 1}, high watermark "
                          f"{r['high']}" for r in resets)
        raise OffsetRegressionError(
            f"kafka {source.bootstrap}: offsets went backwards ({where}). The topic was deleted and recreated, or "
            "the partition lost records. Nothing was landed. To land these partitions again from their earliest "
            "offset, set kafka.offset_reset: earliest in the source config (cdclake apply: --offset-reset "
            "earliest); changes apply by source position, so records seen before are no-ops.")
    for r in resets:
        log.warning("%s/%d: the lake landed up to offset %d but the high watermark is %d (topic recreated?): "
                    "landing it again from offset %d (offset_reset=earliest)", r["topic"], r["partition"],
                    r["landed"] - 1, r["high"], r["low"])
    takes = _cap([high - start for _, _, start, high in wanted], source.max_batch_records)
    planned = [(topic, partition, start, start + take, high)
               for (topic, partition, start, high), take in zip(wanted, takes) if take > 0]
    return Plan(planned, lost, resets)


def _offset_ranges(batch_id: str, planned: list[Planned]) -> list[OffsetRange]:
    return [OffsetRange(topic, partition, start, end, high, index, f"batches/{batch_id}/part-{index:05d}.jsonl")
            for index, (topic, partition, start, end, high) in enumerate(planned)]


def _manifest(batch_id: str, source_name: str, source: KafkaSource, previous: dict[str, Any] | None,
              ranges: list[OffsetRange], plan: Plan) -> dict[str, Any]:
    offsets: dict[str, dict[str, int]] = {}
    for (topic, partition), nxt in sorted(landed_offsets(previous).items()):
        offsets.setdefault(topic, {})[str(partition)] = nxt
    for r in ranges:
        offsets.setdefault(r.topic, {})[str(r.partition)] = r.end
    files = [{
        "input": f"kafka:{r.topic}/{r.partition}",
        # Identifies the range (file landing's sha256 of the content): the same range is the same input.
        "sha256": hashlib.sha256(f"kafka:{r.topic}/{r.partition}/{r.start}-{r.end}".encode()).hexdigest(),
        "size": None,
        "framing": FRAMING,
        "messages": r.end - r.start,
        "broken": 0,
        "first_line": None,
        "last_line": None,
        "raw_object": r.raw_object,
        "raw_sha256": None,
    } for r in ranges]
    return {
        "batch_id": batch_id,
        "source": source_name,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
        # Offsets planned: an upper bound of the records (compaction and transaction markers leave gaps); the
        # completion marker holds the records actually landed.
        "message_count": sum(r.end - r.start for r in ranges),
        "files": files,
        "kafka": {
            "bootstrap": source.bootstrap,
            "topics": list(source.topics),
            "pattern": source.pattern,
            "group_id": source.group_id,
            "previous_batch": previous["batch_id"] if previous else None,
            "ranges": [r.to_dict() for r in ranges],
            "offsets": offsets,
            "lost_to_retention": plan.lost,
            "offset_resets": plan.resets,
        },
        "cdclake_version": __version__,
    }


def _ranges_of(manifest: dict[str, Any]) -> list[OffsetRange]:
    return [OffsetRange(**r) for r in manifest["kafka"]["ranges"]]


# ---------------------------------------------------------------------------------------------------------------
# Reading (Spark tasks)


def _text(data: bytes | None, name: str, binary: list[str]) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        binary.append(name)
        return base64.b64encode(data).decode("ascii")


def _json(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return encode_basestring(value)
    return str(value)


class RawLines:
    """Encodes one partition range's Kafka records as raw-record JSON lines, exactly as :func:`json.dumps` renders
    file landing's records (:data:`cdclake.landing.RAW_FIELDS`, same order and separators).

    Hand-built because it runs once per record: the constant parts of a line are rendered once per range, and the
    common case (UTF-8 key, value and headers) takes one decode per field.
    """

    def __init__(self, *, topic: str, partition: int, file_index: int) -> None:
        self.head = (f'{{"input": {encode_basestring(f"kafka:{topic}/{partition}")}, '
                     f'"file_index": {file_index}, "index": ')
        self.middle = (f', "line": null, "byte_offset": null, "framing": "{FRAMING}", '
                       f'"topic": {encode_basestring(topic)}, "partition": {partition}, "offset": ')

    def line(self, index: int, offset: int, timestamp: int | None, headers: list[tuple[str, bytes | None]] | None,
             key: bytes | None, value: bytes | None) -> str:
        """One record's line, ending in a line feed."""
        try:
            key_json = "null" if key is None else encode_basestring(key.decode("utf-8"))
            text = None if value is None else value.decode("utf-8")
            value_json = "null" if text is None else encode_basestring(text)
            if headers is None:
                header_json = "null"
            else:
                # A repeated header name keeps its last value, as in a JSON object (and json.dumps of a dict).
                members = {name: data for name, data in headers}
                header_json = "{" + ", ".join(
                    f'{encode_basestring(name)}: {"null" if data is None else encode_basestring(data.decode("utf-8"))}'
                    for name, data in members.items()) + "}"
        except UnicodeDecodeError:
            return self._binary_line(index, offset, timestamp, headers, key, value)
        error = None if text is None else record_documents_error(text)
        return (f'{self.head}{index}{self.middle}{offset}, "timestamp": {"null" if timestamp is None else timestamp}, '
                f'"headers": {header_json}, "key": {key_json}, "value": {value_json}, "error": {_json(error)}}}\n')

    def _binary_line(self, index: int, offset: int, timestamp: int | None,
                     headers: list[tuple[str, bytes | None]] | None, key: bytes | None, value: bytes | None) -> str:
        binary: list[str] = []
        header_json = "null"
        if headers is not None:
            members = {name: _text(data, f"header:{name}", binary) for name, data in headers}
            header_json = "{" + ", ".join(f"{_json(k)}: {_json(v)}" for k, v in members.items()) + "}"
        key_json = _json(_text(key, "key", binary))
        value_json = _json(_text(value, "value", binary))
        return (f'{self.head}{index}{self.middle}{offset}, "timestamp": {_json(timestamp)}, '
                f'"headers": {header_json}, "key": {key_json}, "value": {value_json}, "error": null, '
                f'"binary": {json.dumps(binary, ensure_ascii=False)}}}\n')


def raw_line(*, topic: str, partition: int, file_index: int, index: int, offset: int, timestamp: int | None,
             headers: list[tuple[str, bytes | None]] | None, key: bytes | None, value: bytes | None) -> str:
    """One Kafka record as a raw-record JSON line (see :class:`RawLines`)."""
    return RawLines(topic=topic, partition=partition, file_index=file_index).line(
        index, offset, timestamp, headers, key, value)


def read_range(task: dict[str, Any]) -> dict[str, Any]:
    """Read one planned range and write its raw file (runs in a Spark task; also callable directly).

    Args:
        task: ``range`` (:meth:`OffsetRange.to_dict`), ``consumer`` (client config), ``raw_root``,
            ``s3_endpoint``, ``timeout_s``, and ``fault``/``driver_pid`` for the test hook.

    Returns:
        What the file holds: ``messages``, ``bytes``, ``raw_sha256``, ``first_offset``, ``last_offset``,
        ``tombstones``, ``seconds`` (the task's wall time), plus the range itself.

    Raises:
        KafkaLandingError: The broker did not deliver the range (offsets deleted, broker gone, timeout).
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    started = time.monotonic()
    r = OffsetRange(**task["range"])
    where = f"{r.topic}/{r.partition} offsets {r.start}..{r.end - 1}"
    consumer = Consumer(task["consumer"])
    chunks: list[str] = []
    first = last = None
    tombstones = 0
    encode = RawLines(topic=r.topic, partition=r.partition, file_index=r.file_index).line
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.start)])
        position = r.start
        idle_since = time.monotonic()
        while position < r.end:
            batch = consumer.consume(num_messages=min(r.end - position, 10_000), timeout=0.5)
            if not batch:
                # Gaps (compaction, transaction markers) can end a range without a record at end - 1.
                current = consumer.position([TopicPartition(r.topic, r.partition)])[0].offset
                if current >= r.end:
                    break
                if time.monotonic() - idle_since > task["timeout_s"]:
                    raise KafkaLandingError(f"kafka: no progress reading {where} for {task['timeout_s']} s "
                                            f"(at offset {position}); is the broker reachable?")
                continue
            idle_since = time.monotonic()
            for msg in batch:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= r.end:
                            position = r.end
                        continue
                    raise KafkaLandingError(f"kafka: reading {where}: {err.str()}"
                                            + (" (offsets deleted by retention?)"
                                               if err.code() == KafkaError._AUTO_OFFSET_RESET else ""))
                offset = msg.offset()
                if offset < position:
                    continue
                if offset >= r.end:
                    position = r.end
                    break
                ts_type, ts = msg.timestamp()
                value = msg.value()
                chunks.append(encode(len(chunks), offset, ts if ts_type != 0 else None, msg.headers(), msg.key(),
                                     value))
                tombstones += value is None
                first = offset if first is None else first
                last = offset
                position = offset + 1
    finally:
        consumer.close()
    body = "".join(chunks).encode("utf-8")
    store = open_store(task["raw_root"], s3_endpoint=task["s3_endpoint"])
    store.write_bytes(r.raw_object, body)  # deterministic name, whole-object overwrite: a re-run rewrites it
    if task.get("fault") == "mid-files" and r.file_index == 0:
        os.kill(task["driver_pid"], signal.SIGKILL)
    return {**r.to_dict(), "messages": len(chunks), "bytes": len(body),
            "raw_sha256": hashlib.sha256(body).hexdigest(), "first_offset": first, "last_offset": last,
            "tombstones": tombstones, "seconds": round(time.monotonic() - started, 3)}


def _read_all(spark: "SparkSession", tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    sc = spark.sparkContext
    if "PYSPARK_PYTHON" not in os.environ and sc.pythonExec == "python3":
        # Tasks run Python: it must be this interpreter, where cdclake and confluent-kafka are installed, not
        # whatever "python3" is first on the PATH.
        sc.pythonExec = sys.executable
    sc.setJobDescription(f"cdclake: land {len(tasks)} Kafka offset range(s)")
    return sc.parallelize(tasks, len(tasks)).map(_read_range_task).collect()


def _read_range_task(task: dict[str, Any]) -> dict[str, Any]:
    """:func:`read_range` in a Spark task: a failure comes back as the range's ``error`` (Spark would wrap the
    exception in a Java stack trace) so the driver can raise one clear error naming every failed range."""
    from confluent_kafka import KafkaException

    try:
        return read_range(task)
    except (KafkaLandingError, KafkaException) as exc:
        return {**task["range"], "error": str(exc)}


# ---------------------------------------------------------------------------------------------------------------
# The landing run


def _fault(point: str) -> None:
    if point in (os.environ.get(FAULT_ENV) or "").split(","):
        log.warning("%s=%s: killing this process (test hook)", FAULT_ENV, point)
        logging.shutdown()
        os.kill(os.getpid(), signal.SIGKILL)


def _lag(marks: dict[tuple[str, int], tuple[int, int]],
         offsets: dict[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    lag: dict[str, dict[str, int]] = {}
    for (topic, partition), (low, high) in sorted(marks.items()):
        lag.setdefault(topic, {})[str(partition)] = max(high - max(offsets.get((topic, partition), low), low), 0)
    return lag


def _commit(source: KafkaSource, consumer: Any, offsets: dict[tuple[str, int], int]) -> None:
    """Advisory: move the consumer group to the landed offsets, for lag monitoring. Failure only warns."""
    from confluent_kafka import KafkaException, TopicPartition

    if not offsets:
        return
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())],
                        asynchronous=False)
        log.info("committed the landed offsets of %d partition(s) for consumer group %r", len(offsets),
                 source.group_id)
    except KafkaException as exc:
        log.warning("advisory commit of consumer group %r failed (landing is unaffected): %s", source.group_id, exc)


def land_kafka(settings: LakeSettings, *, source: str, kafka: KafkaSource,
               spark: "SparkSession | Callable[[], SparkSession] | None" = None) -> KafkaLanding:
    """Land everything new on a Kafka source's topics as its next micro-batch (see the module docstring).

    Args:
        settings: The lake.
        source: Source name (raw zone folder; batches are numbered per source).
        kafka: Where to read.
        spark: The session whose tasks read the ranges, or a function returning it (called only when there is
            something to read, so a run with no new data starts no Spark); default: this process's session.

    Returns:
        The batch (or ``batch_id=None`` when no partition had new offsets) and the lag per partition.

    Raises:
        InputError: Topics missing or the broker not answering while planning.
        KafkaLandingError: A planned range could not be read; the batch stays incomplete and the next run
            re-reads it.
    """
    faults.check()
    settings.ensure_local_dirs()
    store = raw_store(settings, source)
    consumer = _admin_consumer(kafka)
    try:
        return _land(settings, store, source, kafka, consumer, spark)
    finally:
        consumer.close()


def _land(settings: LakeSettings, store: ObjectStore, source: str, kafka: KafkaSource, consumer: Any,
          spark: Any) -> KafkaLanding:
    resumed = False
    while True:
        previous = latest_kafka_manifest(store)
        if previous is not None and not store.exists(_complete_key(previous["batch_id"])):
            manifest, resumed = previous, True
            log.info("batch %s of %r was planned but not completed: re-reading its %d range(s)",
                     manifest["batch_id"], source, len(manifest["kafka"]["ranges"]))
            break
        landed = landed_offsets(previous)
        token = f"kafka/successor/{previous['batch_id'] if previous else _ORIGIN}"
        adopted = store.read_bytes(token).decode() if store.exists(token) else None
        if adopted is not None and store.exists(f"manifests/{adopted}.json"):
            continue  # another lander committed the successor meanwhile: start over from it
        marks = watermarks(kafka, consumer)
        plan = plan_ranges(kafka, marks, landed)
        if not plan.planned:
            log.info("source %r: no new offsets on %d partition(s)", source, len(marks))
            _commit(kafka, consumer, landed)
            return KafkaLanding(None, False, lag=_log_lag(_lag(marks, landed)))
        if adopted is not None:
            # A lander claimed this successor and died before writing its manifest: take its batch id over.
            batch_id = adopted
        else:
            # Claim an id, then the right to succeed the previous batch; losing that race means another lander
            # is planning the same offsets, so start over from what it commits.
            for batch_id in _next_batch_id(store):
                if store.write_bytes(f"claims/{batch_id}", b"", if_absent=True):
                    break
            if not store.write_bytes(token, batch_id.encode(), if_absent=True):
                continue
        manifest = _manifest(batch_id, source, kafka, previous, _offset_ranges(batch_id, plan.planned), plan)
        key = f"manifests/{batch_id}.json"
        if not store.write_bytes(key, json.dumps(manifest, indent=2).encode("utf-8"), if_absent=True):
            manifest, resumed = json.loads(store.read_bytes(key)), True  # a racing lander's plan wins
        break

    batch_id = manifest["batch_id"]
    ranges = _ranges_of(manifest)
    for r in ranges:
        log.info("batch %s: %s/%d offsets %d..%d (high watermark %d)", batch_id, r.topic, r.partition, r.start,
                 r.end - 1, r.high_watermark)
    _fault("after-manifest")

    fault = os.environ.get(FAULT_ENV)
    root = f"{settings.raw_root.rstrip('/')}/{source}"
    tasks = [{"range": r.to_dict(), "consumer": kafka.consumer_config(), "raw_root": root,
              "s3_endpoint": settings.s3_endpoint, "timeout_s": kafka.timeout_s,
              "fault": fault, "driver_pid": os.getpid()} for r in ranges]
    started = time.monotonic()
    results = sorted(_read_all(_session(settings, spark), tasks), key=lambda x: x["file_index"])
    failed = [x["error"] for x in results if "error" in x]
    if failed:
        raise KafkaLandingError(f"batch {batch_id} of {source!r}: {len(failed)} of {len(results)} offset range(s) "
                                f"could not be read ({'; '.join(failed[:3])}); the batch stays incomplete and the "
                                "next run re-reads its ranges")
    seconds = time.monotonic() - started
    count = sum(x["messages"] for x in results)
    size = sum(x["bytes"] for x in results)
    for x in results:
        log.info("batch %s: %s/%d: %d record(s), %d tombstone(s) -> %s", batch_id, x["topic"], x["partition"],
                 x["messages"], x["tombstones"], x["raw_object"])
    log.info("batch %s of %r: read %d record(s), %.1f MB in %.1f s (%.0f records/s)", batch_id, source, count,
             size / 1e6, seconds, count / seconds if seconds else 0.0)

    offsets = landed_offsets(manifest)
    store.write_bytes(_complete_key(batch_id), json.dumps({
        "batch_id": batch_id,
        "completed_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
        "message_count": count,
        "bytes": size,
        "seconds": round(seconds, 3),
        "ranges": results,
    }, indent=2).encode("utf-8"))
    _fault("before-commit")
    _commit(kafka, consumer, offsets)

    try:
        marks = watermarks(kafka, consumer)
    except InputError as exc:  # lag is for monitoring only; the batch is complete
        log.warning("cannot read the high watermarks for the lag: %s", exc)
        marks = {(r.topic, r.partition): (r.start, r.high_watermark) for r in ranges}
    return KafkaLanding(batch_id, True, resumed, count, store.uri(f"manifests/{batch_id}.json"),
                        _log_lag(_lag(marks, offsets)))


def _session(settings: LakeSettings, spark: Any) -> "SparkSession":
    if spark is not None and hasattr(spark, "sparkContext"):
        return spark
    if spark is not None:
        return spark()
    from cdclake.spark import get_spark

    return get_spark(settings)


def _log_lag(lag: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    for topic, parts in lag.items():
        for partition, behind in parts.items():
            log.info("lag %s/%s: %d offset(s) not landed yet", topic, partition, behind)
    return lag


def current_lag(settings: LakeSettings, *, source: str, kafka: KafkaSource) -> dict[str, dict[str, int]]:
    """Per topic and partition, the high watermark minus the next offset the lake's newest Kafka manifest lands.

    Reads the manifests and asks the broker for the watermarks only: no Spark, nothing written.

    Raises:
        InputError: Topics missing or the broker not answering.
        ConfigError: The client rejects the settings.
    """
    consumer = _admin_consumer(kafka)
    try:
        marks = watermarks(kafka, consumer)
    finally:
        consumer.close()
    return _log_lag(_lag(marks, landed_offsets(latest_kafka_manifest(raw_store(settings, source)))))


def batch_complete(settings: LakeSettings, source: str, batch_id: str) -> bool:
    """Whether a batch is readable: always for file batches, after its completion marker for Kafka batches."""
    store = raw_store(settings, source)
    manifest = json.loads(store.read_bytes(f"manifests/{batch_id}.json"))
    return "kafka" not in manifest or store.exists(_complete_key(batch_id))


def landed_message_count(settings: LakeSettings, source: str, batch_id: str) -> int:
    """Records a batch holds: from a Kafka batch's completion marker (its manifest only knows the planned offsets),
    else from the manifest.

    Raises:
        StorageError: The batch has no manifest.
    """
    store = raw_store(settings, source)
    if store.exists(_complete_key(batch_id)):
        return int(json.loads(store.read_bytes(_complete_key(batch_id)))["message_count"])
    from cdclake.landing import read_manifest

    return int(read_manifest(settings, source, batch_id)["message_count"])
