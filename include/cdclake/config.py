"""Sources are configuration: one YAML file per source under ``include/sources/``, validated into frozen models.

Adding a source means adding a file; the ingestion DAGs (``dags/cdclake_sources.py``), the replay and maintenance
DAGs read the same models. A file looks like this (every field but ``name``, ``format`` and ``inbox`` or ``kafka``
optional)::

    name: shop                       # = the file name (shop.yaml); lake batches and DAG ids are per source
    format: debezium                 # debezium | dtle | canal | drs | ckafka | auto
    inbox: inbox/shop                # directory or s3:// prefix; relative paths are under the lake root
    time_zone: Asia/Shanghai         # zone of timestamp texts without an offset (canal/TiCDC TIMESTAMP, CKafka TIME)
    schedule: "*/15 * * * *"         # cron, a preset such as "@hourly", or null for manual runs only
    kafka:                           # optional; when given, the ingestion DAG lands from these topics
      bootstrap: kafka:9092
      topics: [shop.public.customers]  # or pattern: "shop\\.public\\..*"
      group: cdclake-shop
      max_records: 100000
      security: {security.protocol: SASL_SSL, sasl.password: env:SHOP_KAFKA_PASSWORD}
      connection: kafka_shop         # or: an Airflow connection whose extra holds the security settings
      max_lag: 50000                 # data-quality threshold of the offsets not landed yet after a run
      offset_reset: fail             # offsets went backwards (topic recreated): fail | earliest
    tables:
      include: ["public.*"]          # globs over namespace.table; default everything
      exclude: ["public.audit_*"]
    defaults:                        # options of every table (each has a default, see TableOptions)
      partition_spec: ["bucket(16, key)"]
      delete_mode: hard
    overrides:                       # per table (namespace.table or a glob), over the defaults; first match wins
      public.orders: {key: [order_id, line_no], write_mode: copy-on-write}
      shop.products: {document_fields: {sku: string, qty: bigint}}   # MongoDB: fields as typed columns too

Errors are :class:`~cdclake.exceptions.SourceConfigError` naming the file, the line and the dotted field path.
Secrets never live in these files: a security setting whose name says it is a secret must reference the
environment (``env:VAR``).
"""

from __future__ import annotations

import fnmatch
import os
import re
import zoneinfo
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Mapping

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cdclake.exceptions import ConfigError, SourceConfigError

if TYPE_CHECKING:
    from cdclake.apply_options import ApplyOptions
    from cdclake.kafka import KafkaSource
    from cdclake.schema_changes import DdlPolicies

SOURCES_DIR_ENV = "CDCLAKE_SOURCES_DIR"
"""Environment variable naming the directory of source files (default: ``include/sources`` of this package)."""

DEFAULT_SOURCES_DIR = Path(__file__).resolve().parents[1] / "sources"

SOURCE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_COLUMN = r"[A-Za-z_][A-Za-z0-9_]*"
_PARTITION_FIELD = re.compile(
    rf"^(?:(?P<ident>{_COLUMN})|(?P<fn>year|month|day|hour|years|months|days|hours)\((?P<tcol>{_COLUMN})\)"
    rf"|(?P<nfn>bucket|truncate)\((?P<n>[1-9][0-9]*),\s*(?P<ncol>{_COLUMN})\))$"
)
_CRON_PRESETS = {"@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly"}
_SECRET_NAME = re.compile(r"password|secret|token|key", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(?P<n>\d+)\s*(?P<unit>s|m|h|d)\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_duration(value: Any) -> timedelta:
    """A duration from ``30s``/``15m``/``2h``/``7d``, a number of seconds, or a timedelta.

    Raises:
        ValueError: Anything else (pydantic turns it into a field error).
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return timedelta(seconds=value)
    match = _DURATION.match(str(value)) if isinstance(value, str) else None
    if not match:
        raise ValueError(f"expected a duration such as 30s, 15m, 2h or 7d, got {value!r}")
    return timedelta(**{_UNITS[match["unit"]]: int(match["n"])})


_ZONE_OFFSET = re.compile(r"^[+-](?:0\d|1[0-8]):[0-5]\d$")


def check_time_zone(zone: str) -> str:
    """A source time zone as given (an IANA name such as ``Asia/Shanghai``, ``UTC``, or an offset ``+08:00``).

    Raises:
        ConfigError: Neither.
    """
    name = zone.strip()
    if _ZONE_OFFSET.match(name):
        return name
    try:
        zoneinfo.ZoneInfo(name)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise ConfigError(f"time zone {zone!r}: expected an IANA name such as Asia/Shanghai or UTC, or an offset "
                          "such as +08:00") from None
    return name


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class KafkaConfig(_Model):
    """Where a source's changes are published, when they come from Kafka: the ingestion DAG then lands from these
    topics (an inbox the config also names is not read).

    Attributes:
        bootstrap: ``host:port[,host:port]`` of the brokers.
        topics: Topic names; exactly one of ``topics`` and ``pattern``.
        pattern: A regular expression over topic names (e.g. Debezium's ``<prefix>\\.<schema>\\..*``).
        group: Consumer group (offset commits are advisory; the lake's manifests are the truth).
        max_records: Most records one micro-batch lands.
        security: librdkafka settings passed through as-is (``security.protocol``, ``sasl.*``, ``ssl.*``);
            values ``env:VAR`` are read from the environment when used, and secret settings must use that form.
        max_lag: The data-quality threshold of the lag (offsets on the topics not landed yet, summed over the
            partitions) after a run lands; above it the ``kafka_lag`` result is ``warned``. None: recorded only.
        offset_reset: When a partition's offsets went backwards (the topic was recreated): ``fail`` (the landing
            stops and names the partitions) or ``earliest`` (land them again from their first offset).
        connection: An Airflow connection id whose ``extra`` holds security settings (``security.protocol``,
            ``sasl.*``, ``ssl.*``; its login/password fill ``sasl.username``/``sasl.password`` when the extra
            has none). Read by the DAG tasks when they land; ``security`` entries override it.
    """

    bootstrap: str = Field(min_length=1)
    topics: tuple[str, ...] | None = None
    pattern: str | None = None
    group: str = Field(min_length=1)
    max_records: int = Field(default=100_000, gt=0)
    security: dict[str, str] = Field(default_factory=dict)
    max_lag: int | None = Field(default=None, ge=0)
    offset_reset: Literal["fail", "earliest"] = "fail"
    connection: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _topics_or_pattern(self) -> "KafkaConfig":
        if bool(self.topics) == bool(self.pattern):
            raise ValueError("give exactly one of topics (a non-empty list) and pattern")
        if self.pattern:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern {self.pattern!r} is not a regular expression: {exc}") from None
        return self

    @field_validator("security")
    @classmethod
    def _no_literal_secrets(cls, value: dict[str, str]) -> dict[str, str]:
        for name, setting in value.items():
            # Paths to key material (ssl.key.location, sasl.kerberos.keytab) are not secrets themselves.
            if (_SECRET_NAME.search(name) and not str(setting).startswith("env:")
                    and not name.endswith(("location", "keytab"))):
                raise ValueError(f"{name}: secrets come from the environment; write env:VARIABLE, not the value")
        return value

    def resolved_security(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The security settings with ``env:VAR`` values read from the environment.

        Raises:
            SourceConfigError: A referenced variable is not set.
        """
        env = os.environ if env is None else env
        out = {}
        for name, setting in self.security.items():
            if setting.startswith("env:"):
                variable = setting[len("env:"):]
                if variable not in env:
                    raise SourceConfigError(f"kafka.security.{name}: environment variable {variable} is not set")
                out[name] = env[variable]
            else:
                out[name] = setting
        return out

    def kafka_source(self, env: Mapping[str, str] | None = None,
                     connection: Mapping[str, str] | None = None) -> "KafkaSource":
        """What :mod:`cdclake.kafka` lands from: these settings, with the secrets resolved and ``CDCLAKE_KAFKA_*``
        security settings of the environment on top.

        Args:
            env: The environment (default ``os.environ``).
            connection: Security settings of the Airflow connection named by ``connection`` (under ``security``).

        Raises:
            SourceConfigError: A referenced environment variable is not set.
            ConfigError: The client settings are invalid.
        """
        from cdclake.kafka import KafkaSource

        return KafkaSource.from_config(self.bootstrap, topics=self.topics, pattern=self.pattern, group_id=self.group,
                                       max_batch_records=self.max_records,
                                       client_config={**(connection or {}), **self.resolved_security(env)},
                                       offset_reset=self.offset_reset, env=env)


class MaintenanceOptions(_Model):
    """Thresholds of the maintenance DAG for a table (see :mod:`cdclake.maintenance`).

    Attributes:
        min_data_files: Compact data files only when the table has at least this many.
        min_input_files: ``rewrite_data_files``' min-input-files: a file group is rewritten from this many files.
        target_file_size_mb: Target size of rewritten data files.
        min_delete_files: Rewrite position-delete files only when there are at least this many.
        expire_older_than: Expire snapshots older than this...
        retain_last: ...but always keep this many.
        orphan_older_than: Remove unreferenced files older than this (keep it above the longest write).
        tombstone_retention: Forget hard-delete tombstones recorded longer ago than this; None (default) keeps
            them forever. After expiry a late change older than the delete could bring the row back: set it above
            the longest delay a change can have (replays of old batches included).
    """

    min_data_files: int = Field(default=8, ge=1)
    min_input_files: int = Field(default=5, ge=2)
    target_file_size_mb: int = Field(default=128, ge=1)
    min_delete_files: int = Field(default=4, ge=1)
    expire_older_than: Annotated[timedelta, Field(default=timedelta(days=7))]
    retain_last: int = Field(default=10, ge=1)
    orphan_older_than: Annotated[timedelta, Field(default=timedelta(days=3))]
    tombstone_retention: timedelta | None = None

    @field_validator("expire_older_than", "orphan_older_than", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> timedelta:
        return parse_duration(value)

    @field_validator("tombstone_retention", mode="before")
    @classmethod
    def _retention(cls, value: Any) -> timedelta | None:
        return None if value is None else parse_duration(value)


class TableOptions(_Model):
    """How one table is kept (defaults of the source, overridden per table).

    Attributes:
        key: Primary-key columns, for streams that carry none or to override the stream's; None keeps the stream's.
        partition_spec: Iceberg partition fields: a column, ``bucket(N, col)``, ``truncate(N, col)``,
            ``day(col)``...; ``key`` stands for the first primary-key column. Default ``bucket(16, key)``.
        delete_mode: ``hard`` removes deleted rows (tombstones keep them deleted); ``soft`` keeps them flagged.
        write_mode: ``merge-on-read`` (position deletes, cheap writes) or ``copy-on-write``.
        ddl_policy: DDL events: ``evolve`` the table, ``ignore`` them, or ``fail`` (hold the table's changes).
        history: Keep an SCD type 2 history table (``cdclake_history.<namespace>__<table>``).
        reconcile_snapshots: A completed snapshot (Debezium's end marker, a DRS/canal full sync followed by a
            streamed change) deletes the rows it did not see that nothing changed after it began.
        document_fields: MongoDB collections (a JSON ``document`` column): top-level fields also kept as typed
            columns, ``{field: type}`` (string, boolean, int, bigint, double, float, date, timestamp,
            decimal(P,S)) or a list of fields kept as strings.
        dq_policy: A failed expectation ``fail``s the run, only ``warn``s, or ``quarantine``s the batch's changes.
        freshness_sla: Newest change older than this (by source time) is a freshness failure; None: no check.
        maintenance: Thresholds of the maintenance DAG.
    """

    key: tuple[str, ...] | None = None
    partition_spec: tuple[str, ...] = ("bucket(16, key)",)
    delete_mode: Literal["hard", "soft"] = "hard"
    write_mode: Literal["merge-on-read", "copy-on-write"] = "merge-on-read"
    ddl_policy: Literal["evolve", "ignore", "fail"] = "evolve"
    history: bool = False
    reconcile_snapshots: bool = True
    document_fields: dict[str, str] = Field(default_factory=dict)
    dq_policy: Literal["fail", "warn", "quarantine"] = "fail"
    freshness_sla: timedelta | None = None
    maintenance: MaintenanceOptions = Field(default_factory=MaintenanceOptions)

    def apply_options(self) -> "ApplyOptions":
        """What apply needs of these options (``key`` in the partition spec is the first key column)."""
        from cdclake.apply_options import ApplyOptions

        return ApplyOptions(delete_mode=self.delete_mode, write_mode=self.write_mode,
                            partition=tuple(self.partition_spec), history=self.history,
                            reconcile_snapshots=self.reconcile_snapshots,
                            document_fields=tuple(self.document_fields.items()))

    @field_validator("document_fields", mode="before")
    @classmethod
    def _document_fields(cls, value: Any) -> dict[str, str]:
        from cdclake.apply_options import document_field_type

        if isinstance(value, (list, tuple)):
            value = {str(name): "string" for name in value}
        if not isinstance(value, dict):
            raise ValueError("expected {field: type} or a list of fields")
        try:
            return {str(name): document_field_type(str(name), str(t)) for name, t in value.items()}
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("key")
    @classmethod
    def _key(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None:
            if not value:
                raise ValueError("key must name at least one column (or be left out)")
            for column in value:
                if not re.fullmatch(_COLUMN, column):
                    raise ValueError(f"key column {column!r} is not a column name")
            if len(set(value)) < len(value):
                raise ValueError(f"key names a column twice: {list(value)}")
        return value

    @field_validator("partition_spec")
    @classmethod
    def _partition_spec(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not _PARTITION_FIELD.match(item.strip()):
                raise ValueError(f"partition field {item!r}: expected COLUMN, bucket(N, COLUMN), truncate(N, COLUMN), "
                                 "year|month|day|hour(COLUMN); 'key' means the first key column")
        return tuple(item.strip() for item in value)

    @field_validator("freshness_sla", mode="before")
    @classmethod
    def _sla(cls, value: Any) -> timedelta | None:
        return None if value is None else parse_duration(value)


class TableSelection(_Model):
    """Which tables of the stream a source applies; the others are counted as excluded and left alone.

    Attributes:
        include: Globs over ``namespace.table`` (``*`` everything).
        exclude: Globs removed from what ``include`` matched.
    """

    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()

    def matches(self, table_id: str) -> bool:
        """Whether ``namespace.table`` is applied."""
        return (any(fnmatch.fnmatchcase(table_id, g) for g in self.include)
                and not any(fnmatch.fnmatchcase(table_id, g) for g in self.exclude))


def _options_fields() -> set[str]:
    return set(TableOptions.model_fields)


class SourceConfig(_Model):
    """One source: where its changes are, how they are read, and how its tables are kept.

    Attributes:
        name: Source name (``[a-z][a-z0-9_]*``, = the file name); batches, raw zone and DAG ids are per source.
        format: Change-stream format (a key of :data:`cdclake.formats.FORMATS`).
        inbox: Directory or ``s3://`` prefix to land new files from; a relative path is under the lake root.
            Required unless the source names ``kafka``.
        schedule: Cron expression or preset of the ingestion DAG, or None for manual runs only.
        start_date: First data interval of the ingestion DAG (UTC).
        end_date: Last data interval of the ingestion DAG (UTC), or None: a source that was retired, or whose
            history is only backfilled; the scheduler creates no run after it.
        retries: Task retries of the ingestion DAG.
        retry_delay: Delay between retries.
        kafka: Kafka coordinates; when given, the ingestion DAG lands from these topics instead of the inbox.
        tables: Table selection.
        time_zone: The source server's time zone (IANA name or ``+08:00``), in which timestamp texts without an
            offset are read: canal's and TiCDC's MySQL ``TIMESTAMP``, CKafka's ``TIME`` (default UTC).
        defaults: Options of every table.
        overrides: Per-table options over the defaults, by ``namespace.table`` or glob (first match wins).
        path: The file the config came from (not part of the YAML).
    """

    name: str
    format: str
    inbox: str | None = Field(default=None, min_length=1)
    schedule: str | None = "*/15 * * * *"
    start_date: datetime = datetime(2025, 1, 1, tzinfo=timezone.utc)
    end_date: datetime | None = None
    retries: int = Field(default=2, ge=0, le=10)
    retry_delay: Annotated[timedelta, Field(default=timedelta(seconds=30))]
    kafka: KafkaConfig | None = None
    tables: TableSelection = Field(default_factory=TableSelection)
    time_zone: str = "UTC"
    defaults: TableOptions = Field(default_factory=TableOptions)
    overrides: dict[str, dict[str, Any]] = Field(default_factory=dict)
    path: Path | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _dates(self) -> "SourceConfig":
        if self.end_date is not None and self.end_date < self.start_date:
            raise ValueError(f"end_date: {self.end_date.isoformat()} is before start_date "
                             f"{self.start_date.isoformat()}")
        return self

    @model_validator(mode="after")
    def _inbox_or_kafka(self) -> "SourceConfig":
        if self.inbox is None and self.kafka is None:
            raise ValueError("inbox: required unless the source names kafka (the topics to land from)")
        return self

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not SOURCE_NAME.match(value):
            raise ValueError(f"{value!r}: expected lower-case letters, digits and _, starting with a letter")
        return value

    @field_validator("format")
    @classmethod
    def _format(cls, value: str) -> str:
        from cdclake.formats import FORMATS

        if value not in FORMATS:
            raise ValueError(f"unknown format {value!r}; expected one of {', '.join(FORMATS)}")
        return value

    @field_validator("time_zone")
    @classmethod
    def _time_zone(cls, value: str) -> str:
        try:
            return check_time_zone(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str | None) -> str | None:
        if value is None or value in _CRON_PRESETS:
            return value
        from croniter import croniter

        if not croniter.is_valid(value):
            raise ValueError(f"{value!r} is neither a cron expression nor one of {', '.join(sorted(_CRON_PRESETS))}")
        return value

    @field_validator("start_date", "end_date")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return value if value is None or value.tzinfo else value.replace(tzinfo=timezone.utc)

    @field_validator("retry_delay", mode="before")
    @classmethod
    def _retry_delay(cls, value: Any) -> timedelta:
        return parse_duration(value)

    @field_validator("overrides")
    @classmethod
    def _overrides(cls, value: dict[str, dict[str, Any]], info: Any) -> dict[str, dict[str, Any]]:
        # Validate each override as TableOptions fields now, so errors point at the file; merged in table_options.
        for pattern, options in value.items():
            if not isinstance(options, dict):
                raise ValueError(f"{pattern}: expected a mapping of table options")
            unknown = set(options) - _options_fields()
            if unknown:
                raise ValueError(f"{pattern}: unknown option(s) {', '.join(sorted(unknown))}; "
                                 f"expected {', '.join(sorted(_options_fields()))}")
            try:
                TableOptions.model_validate(options)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')} "
                    f"(got {e['input']!r})" for e in exc.errors())
                raise ValueError(f"{pattern}: {problems}") from None
        return value

    def applies_to(self, table_id: str) -> bool:
        """Whether this source applies a table (``tables.include``/``exclude``)."""
        return self.tables.matches(table_id)

    def table_options(self, table_id: str) -> TableOptions:
        """The options of a table: the defaults, with the first matching override's fields on top.

        Args:
            table_id: ``namespace.table``.

        Returns:
            The typed options.
        """
        for pattern, options in self.overrides.items():
            if table_id == pattern or fnmatch.fnmatchcase(table_id, pattern):
                merged = {**self.defaults.model_dump(exclude_unset=True), **options}
                maintenance = {**self.defaults.maintenance.model_dump(exclude_unset=True),
                               **options.get("maintenance", {})}
                if maintenance:
                    merged["maintenance"] = maintenance
                return TableOptions.model_validate(merged)
        return self.defaults

    def declared_keys(self) -> list[str]:
        """Key declarations of the defaults and exact-name overrides, in ``--key`` form (``[TABLE=]COL,...``)."""
        keys = []
        if self.defaults.key:
            keys.append(",".join(self.defaults.key))
        for pattern, options in self.overrides.items():
            if options.get("key") and not any(ch in pattern for ch in "*?["):
                keys.append(f"{pattern}={','.join(options['key'])}")
        return keys

    def ddl_policies(self) -> "DdlPolicies":
        """The DDL policy of each table: the defaults', with the overrides' that set one."""
        from cdclake.schema_changes import DdlPolicies

        return DdlPolicies(self.defaults.ddl_policy, {
            pattern.lower(): options["ddl_policy"] for pattern, options in self.overrides.items()
            if options.get("ddl_policy")})

    def inbox_location(self, lake_root: Path) -> str:
        """The inbox as an absolute path or URI (relative paths are under the lake root).

        Raises:
            SourceConfigError: The source has no inbox (it lands from Kafka).
        """
        if self.inbox is None:
            raise SourceConfigError(f"{self.path or self.name}: source {self.name!r} has no inbox (it lands from kafka)")
        if "://" in self.inbox or Path(self.inbox).is_absolute():
            return self.inbox
        return str(lake_root / self.inbox)

    @property
    def dag_id(self) -> str:
        """The id of this source's ingestion DAG."""
        return f"cdclake_sources__{self.name}"


def _line_of(root: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the YAML node at a pydantic error location (the deepest node that exists)."""
    node, line = root, (root.start_mark.line + 1 if root is not None else None)
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = next((v for k, v in node.value if k.value == str(part)), None)
            if found is None:
                found = next((k for k, v in node.value if k.value == str(part)), None)
                return found.start_mark.line + 1 if found is not None else line
            node = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            break
        line = node.start_mark.line + 1
    return line


def _describe(path: Path, root: yaml.Node | None, error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        loc = tuple(item["loc"])
        field = ".".join(str(p) for p in loc) or "(file)"
        line = _line_of(root, loc)
        value = f" (got {item['input']!r})" if item["type"] != "missing" and not isinstance(item["input"], dict) \
            else ""
        message = item["msg"].removeprefix("Value error, ")
        lines.append(f"{path}:{line or 1}: field {field}: {message}{value}")
    return "\n".join(lines)


class _SourceLoader(yaml.SafeLoader):
    """YAML as source files are read: a date or time stays text (validated by its field, so a wrong one is an
    error naming the field, not a traceback of YAML's timestamp parser), and a key twice in a mapping is an error
    (the second would silently win)."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"field {key} appears twice (also on line {seen[key]})", key_node.start_mark)
            if isinstance(key, (str, int, float, bool)):
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def load_source(path: str | os.PathLike[str]) -> SourceConfig:
    """Read and validate one source file.

    Args:
        path: The YAML file; its stem must equal the ``name`` inside.

    Returns:
        The validated, frozen config.

    Raises:
        SourceConfigError: The file is unreadable, not YAML, not a mapping, or a field is invalid; the message
            names the file, line and field.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SourceConfigError(f"{path}: cannot read source config: {exc.strerror}") from exc
    try:
        root = yaml.compose(text, Loader=_SourceLoader)
        data = yaml.load(text, Loader=_SourceLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise SourceConfigError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from exc
    if not isinstance(data, dict):
        raise SourceConfigError(f"{path}:1: a source config must be a mapping of fields, got {type(data).__name__}")
    try:
        config = SourceConfig.model_validate(data).model_copy(update={"path": path})
    except ValidationError as exc:
        raise SourceConfigError(_describe(path, root, exc)) from None
    if config.name != path.stem:
        raise SourceConfigError(f"{path}:{_line_of(root, ('name',))}: field name: {config.name!r} must equal the "
                                f"file name {path.stem!r} (one file per source)")
    return config


def sources_dir(env: Mapping[str, str] | None = None) -> Path:
    """The directory of source files: ``CDCLAKE_SOURCES_DIR``, else ``include/sources``."""
    env = os.environ if env is None else env
    return Path(env.get(SOURCES_DIR_ENV) or DEFAULT_SOURCES_DIR)


def read_sources(directory: str | os.PathLike[str] | None = None) -> tuple[dict[str, SourceConfig], dict[Path, str]]:
    """Every ``*.yaml`` source of a directory, and the error of each file that is invalid.

    Unlike :func:`load_sources`, an invalid file does not hide the valid ones: the DAG file builds the valid
    sources' DAGs and shows each invalid file's error on its own.

    Args:
        directory: Default :func:`sources_dir`.

    Returns:
        The valid sources by name, sorted, and the invalid files' error messages (file, line, field and value) by
        path, sorted; both empty when the directory does not exist.
    """
    directory = Path(directory) if directory is not None else sources_dir()
    configs: dict[str, SourceConfig] = {}
    errors: dict[Path, str] = {}
    for path in sorted(directory.glob("*.yaml")) if directory.is_dir() else []:
        try:
            config = load_source(path)
        except SourceConfigError as exc:
            errors[path] = str(exc)
            continue
        configs[config.name] = config
    return configs, errors


def load_sources(directory: str | os.PathLike[str] | None = None) -> dict[str, SourceConfig]:
    """Every ``*.yaml`` source of a directory, by name.

    Args:
        directory: Default :func:`sources_dir`.

    Returns:
        The sources, sorted by name (empty when the directory does not exist).

    Raises:
        SourceConfigError: A file is invalid (all invalid files are reported together; :func:`read_sources`
            returns the valid sources and the errors instead).
    """
    configs, errors = read_sources(directory)
    if errors:
        raise SourceConfigError("\n".join(errors.values()))
    return configs
