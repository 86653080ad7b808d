"""The docker-compose stack, validated without a Docker engine: Debian's ``docker-compose`` (1.29) resolves the file
with ``config`` exactly as ``docker compose up`` would read it, interpolating ``.env``-style settings."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yaml"
ENV_EXAMPLE = REPO / ".env.example"
SECRETS = {"POSTGRES_PASSWORD": "pg-secret", "MINIO_ROOT_PASSWORD": "minio-secret",
           "AIRFLOW_JWT_SECRET": "jwt-secret"}


def _example_env() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def _config(tmp_path: Path, env_values: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``docker-compose config`` with an env file; the process environment holds no compose variables."""
    env_file = tmp_path / "compose.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in env_values.items()))
    docker_compose = shutil.which("docker-compose")
    assert docker_compose, "docker-compose is missing: apt-get install docker-compose (or run .ci/bootstrap)"
    clean_env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    return subprocess.run([docker_compose, "--project-directory", str(REPO), "--env-file", str(env_file),
                           "-f", str(COMPOSE), "config"], capture_output=True, text=True, timeout=120,
                          env=clean_env, check=False)


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The stack as compose resolves it with .env.example plus the secrets an operator fills in."""
    proc = _config(tmp_path_factory.mktemp("compose"), {**_example_env(), **SECRETS})
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load(proc.stdout)


def test_compose_file_is_valid_and_has_the_stack(resolved: dict) -> None:
    expected = {"postgres", "minio", "minio-init", "airflow-init", "airflow-api-server", "airflow-scheduler",
                "airflow-dag-processor", "airflow-triggerer", "spark-master", "spark-worker"}
    assert expected <= set(resolved["services"])


def test_every_variable_the_file_uses_is_documented_in_env_example() -> None:
    used = set(re.findall(r"(?<!\$)\$\{([A-Z_][A-Z0-9_]*)", COMPOSE.read_text()))
    assert used <= set(_example_env()), sorted(used - set(_example_env()))


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_a_missing_secret_stops_compose_with_its_name(tmp_path: Path, missing: str) -> None:
    values = {**_example_env(), **SECRETS}
    values.pop(missing)
    proc = _config(tmp_path, values)
    assert proc.returncode != 0
    assert missing in proc.stderr


def test_spark_cluster_services(resolved: dict) -> None:
    services = resolved["services"]
    master, worker = services["spark-master"], services["spark-worker"]
    for service in (master, worker):
        assert service["build"]["target"] == "spark"
        assert (Path(service["build"]["context"]) / service["build"]["dockerfile"]).is_file()
        # Executors see the lake at the drivers' path.
        assert any(str(v).startswith("lake:/opt/cdclake/lake") for v in service["volumes"])
        assert service["environment"]["AWS_SECRET_ACCESS_KEY"] == SECRETS["MINIO_ROOT_PASSWORD"]
    assert master["command"][:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]
    assert worker["command"][:3] == ["spark-class", "org.apache.spark.deploy.worker.Worker",
                                     "spark://spark-master:7077"]
    assert worker["environment"]["SPARK_WORKER_CORES"] == _example_env()["SPARK_WORKER_CORES"]


def test_airflow_services_share_one_configuration(resolved: dict) -> None:
    services = resolved["services"]
    airflow = [s for name, s in services.items() if name.startswith("airflow-")]
    assert len(airflow) == 5
    env = airflow[0]["environment"]
    assert all(s["environment"] == env and s["build"]["target"] == "airflow" for s in airflow)
    assert env["CDCLAKE_CATALOG_URI"] == "jdbc:postgresql://postgres:5432/iceberg"
    assert env["CDCLAKE_CATALOG_PASSWORD"] == SECRETS["POSTGRES_PASSWORD"]
    assert env["CDCLAKE_SPARK_MASTER"] == _example_env()["CDCLAKE_SPARK_MASTER"]
    assert env["AIRFLOW_CONN_SPARK_CDCLAKE"] == "spark://spark-master:7077"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")


def test_spark_image_adds_the_s3_jars_that_match_the_runtime() -> None:
    dockerfile = (REPO / "deploy" / "Dockerfile").read_text()
    for jar in ("hadoop-aws", "aws-java-sdk-bundle", "iceberg-aws-bundle"):
        assert f"/{jar}-" in dockerfile, jar
    assert "ARG ICEBERG_VERSION=1.10.2" in dockerfile  # = the runtime jar from snowpark-connect-deps-iceberg
    import pyspark  # pyspark's own Hadoop decides hadoop-aws's version
    hadoop = sorted(p.name for p in Path(pyspark.__path__[0], "jars").glob("hadoop-client-api-*.jar"))
    assert hadoop and f"ARG HADOOP_AWS_VERSION={hadoop[0][len('hadoop-client-api-'):-len('.jar')]}" in dockerfile
