"""The one SparkSession of a process, wired to the lake's Iceberg JDBC catalog.

Jars come from the machine, never from Maven: the Iceberg Spark runtime from the ``snowpark-connect-deps-iceberg``
wheel, the JDBC drivers from Debian's ``libxerial-sqlite-jdbc-java`` / ``libpostgresql-jdbc-java``. Where Maven is
reachable, ``CDCLAKE_SPARK_PACKAGES`` (passed to ``spark.jars.packages``) is the alternative.

Environment: ``CDCLAKE_SPARK_MASTER`` (default ``local[*]``), ``CDCLAKE_SPARK_JARS`` (extra comma-separated jars),
``CDCLAKE_SPARK_PACKAGES``, ``CDCLAKE_SHUFFLE_PARTITIONS`` (default 8).
"""

from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from cdclake.exceptions import ConfigError
from cdclake.settings import CATALOG_NAME, LakeSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

ICEBERG_RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
SQLITE_JDBC_JAR = Path("/usr/share/java/xerial-sqlite-jdbc.jar")
SQLITE_OPTIONS = {"journal_mode": "WAL", "busy_timeout": "60000", "init-catalog-tables": "false"}
"""Options of a SQLite catalog, so that several processes can share it (a replay beside a DAG run, parallel tasks,
the CLI during a run). The catalog's own tables are created by :func:`_create_catalog_tables` with a catalog that
is closed at once: Iceberg's creation check leaves a result set open, which holds a read transaction on its
connection for the life of the process, and then every commit of that process fails (``SQLITE_BUSY``, "Unknown
failure") as soon as another process has committed. WAL lets readers and the writer proceed together; a writer
waits up to a minute for another's transaction."""
POSTGRES_JDBC_JAR = Path("/usr/share/java/postgresql.jar")
WHOLE_STAGE_CODEGEN = "spark.sql.codegen.wholeStage"
CASE_SENSITIVE = "spark.sql.caseSensitive"


def iceberg_runtime_jar() -> Path:
    """Locate the Iceberg Spark runtime jar shipped in the ``snowpark-connect-deps-iceberg`` wheel.

    Raises:
        ConfigError: The wheel is not installed or does not contain the expected jar.
    """
    try:
        jar = Path(str(resources.files("snowpark_connect_deps_iceberg") / "jars" / ICEBERG_RUNTIME_JAR))
    except ModuleNotFoundError as exc:
        raise ConfigError(
            "snowpark-connect-deps-iceberg==1.0.2 is not installed; run .ci/bootstrap (it ships the Iceberg jar)"
        ) from exc
    if not jar.is_file():
        raise ConfigError(f"{jar} is missing; snowpark-connect-deps-iceberg must be version 1.0.2")
    return jar


def _jars(settings: LakeSettings) -> list[str]:
    jars = [str(iceberg_runtime_jar())]
    driver = SQLITE_JDBC_JAR if settings.catalog_uri.startswith("jdbc:sqlite:") else POSTGRES_JDBC_JAR
    if not driver.is_file():
        package = "libxerial-sqlite-jdbc-java" if driver is SQLITE_JDBC_JAR else "libpostgresql-jdbc-java"
        raise ConfigError(f"JDBC driver {driver} is missing: apt-get install {package} (or run .ci/bootstrap)")
    jars.append(str(driver))
    extra = os.environ.get("CDCLAKE_SPARK_JARS", "")
    jars.extend(j for j in extra.split(",") if j.strip())
    return jars


def spark_conf(settings: LakeSettings) -> dict[str, str]:
    """The Spark configuration for a lake: Iceberg extensions and the ``lake`` JDBC catalog.

    Args:
        settings: The lake to connect to.

    Returns:
        Spark configuration keys and values (also usable as ``spark-submit --conf`` pairs).
    """
    prefix = f"spark.sql.catalog.{CATALOG_NAME}"
    conf = {
        "spark.jars": ",".join(_jars(settings)),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        f"{prefix}.uri": settings.catalog_uri,
        f"{prefix}.jdbc.schema-version": "V1",
        f"{prefix}.warehouse": settings.warehouse_uri,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": os.environ.get("CDCLAKE_SHUFFLE_PARTITIONS", "8"),
        "spark.sql.adaptive.enabled": "true",
        "spark.ui.enabled": os.environ.get("CDCLAKE_SPARK_UI", "false"),
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": os.environ.get("CDCLAKE_DRIVER_MEMORY", "4g"),
        # Compiled code of query stages, kept for the process. A batch's normalize and apply generate ~170 classes,
        # so Spark's default of 100 evicts each before the next batch could reuse it: every batch compiled them all
        # again (~1.6 s of a small batch's driver time). With room for them, a process's later batches compile ~14.
        "spark.sql.codegen.cache.maxEntries": "1000",
        # A cast of a text that is not a value of the type is null, never an error: the decoders rely on it
        # (cdclake.formats.sqltypes), and a value that does not convert is quarantined, not a failed job.
        "spark.sql.ansi.enabled": "false",
        # Parquet timestamps without time zone stay what they are; Iceberg maps them to timestamp_ntz.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        # A text that does not match a datetime pattern (CKafka's TIME `yyyyMMddHHmmss`) is null. Spark's default
        # (EXCEPTION) fails the whole job instead when the pre-3.0 parser would have read it (`20210625175153"`).
        "spark.sql.legacy.timeParserPolicy": "CORRECTED",
        # Dates and times before 1582-10-15 (MySQL's DATE starts at 1000-01-01) are written and read as the
        # proleptic Gregorian values they are, as Iceberg does; Spark's default refuses to write them.
        **{f"spark.sql.parquet.{kind}RebaseModeIn{way}": "CORRECTED"
           for kind in ("datetime", "int96") for way in ("Write", "Read")},
    }
    if settings.catalog_uri.startswith("jdbc:sqlite:"):
        conf.update({f"{prefix}.jdbc.{k}": v for k, v in SQLITE_OPTIONS.items()})
    if settings.catalog_user:
        conf[f"{prefix}.jdbc.user"] = settings.catalog_user
    if settings.catalog_password:
        conf[f"{prefix}.jdbc.password"] = settings.catalog_password
    if settings.s3_endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = settings.s3_endpoint
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
    packages = os.environ.get("CDCLAKE_SPARK_PACKAGES")
    if packages:
        conf["spark.jars.packages"] = packages
    return conf


def get_spark(settings: LakeSettings, app_name: str = "cdclake") -> "SparkSession":
    """Return this process's SparkSession, creating it on first use.

    One session serves every stage of a process (land, normalize, apply, validate), and its ``lake`` catalog is
    fixed when it starts: a process works with one lake.

    Args:
        settings: The lake the session's ``lake`` catalog points at.
        app_name: Spark application name.

    Returns:
        The active SparkSession.

    Raises:
        ConfigError: The process's session already serves another lake (another catalog or warehouse); its tables
            would go to that lake.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        check_process_lake(settings)
        return active
    settings.ensure_local_dirs()
    # Python workers (UDF-free, but Kafka landing and RDD tasks run Python) use this interpreter, where cdclake
    # and its dependencies are installed, not whatever "python3" is first on the PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name).master(os.environ.get("CDCLAKE_SPARK_MASTER", "local[*]"))
    conf = spark_conf(settings)
    for key, value in conf.items():
        builder = builder.config(key, value)
    log.info("starting Spark (%s) with catalog %s", os.environ.get("CDCLAKE_SPARK_MASTER", "local[*]"),
             settings.catalog_uri)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("CDCLAKE_SPARK_LOG_LEVEL", "ERROR"))
    if settings.catalog_uri.startswith("jdbc:sqlite:"):
        _create_catalog_tables(session, conf)
    _import_hot_classes(session)
    return session


def check_process_lake(settings: LakeSettings) -> None:
    """Refuse a lake other than the one this process's SparkSession serves (when it has one); see :func:`get_spark`.

    Raises:
        ConfigError: Another lake's session is active.
    """
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        return
    prefix = f"spark.sql.catalog.{CATALOG_NAME}"
    serving = {what: session.conf.get(f"{prefix}.{what}", None) for what in ("uri", "warehouse")}
    wanted = {"uri": settings.catalog_uri, "warehouse": settings.warehouse_uri}
    if serving["uri"] is None or serving == wanted:
        return
    raise ConfigError(
        f"this process's Spark session already serves the lake with catalog {serving['uri']} and warehouse "
        f"{serving['warehouse']}; a process works with one lake (its session's catalog is fixed when it starts), so "
        f"the lake with catalog {settings.catalog_uri} and warehouse {settings.warehouse_uri} needs a process of its "
        "own")


def _create_catalog_tables(session: "SparkSession", conf: dict[str, str]) -> None:
    """Create a SQLite catalog's tables if missing, with an Iceberg ``JdbcCatalog`` (configured as the session's,
    ``conf``) closed right after (see :data:`SQLITE_OPTIONS`); the session's catalog starts with
    ``init-catalog-tables`` off."""
    jvm = session.sparkContext._jvm  # type: ignore[attr-defined]
    props = jvm.java.util.HashMap()
    prefix = f"spark.sql.catalog.{CATALOG_NAME}."
    for key, value in conf.items():
        if key.startswith(prefix) and key != prefix + "catalog-impl":
            props.put(key[len(prefix):], value)
    props.put("jdbc.init-catalog-tables", "true")
    catalog = jvm.org.apache.iceberg.jdbc.JdbcCatalog()
    catalog.setConf(session.sparkContext._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    try:
        catalog.initialize(CATALOG_NAME, props)
    finally:
        catalog.close()


HOT_CLASSES = ("org.apache.spark.sql.functions", "org.apache.spark.api.python.PythonUtils",
               "org.apache.spark.sql.SparkSession", "org.apache.spark.sql.SparkSession$")
"""Classes PySpark finds by simple name on most calls (``functions`` on every ``F.*``)."""


def _import_hot_classes(session: "SparkSession") -> None:
    """Import :data:`HOT_CLASSES` into the py4j view PySpark uses.

    py4j resolves a simple name by trying it against each of PySpark's package imports (``org.apache.spark.api.
    java.*``, ...) in turn, and every miss is a class-loader search through all ~250 jars; an exact import is one
    hit. Building a batch's column expressions makes thousands of such lookups: this halves their cost.
    """
    from py4j.java_gateway import java_import

    for name in HOT_CLASSES:
        java_import(session.sparkContext._jvm, name)  # type: ignore[attr-defined]


@contextmanager
def session_settings(spark: "SparkSession", settings: dict[str, str]) -> Iterator[None]:
    """Set runtime SQL settings of the session for a block, then put back what was there before."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
