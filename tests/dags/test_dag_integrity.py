"""DagBag integrity: every DAG in dags/ imports cleanly, is documented and owned, retries, and parses light.

Airflow runs in subprocesses with a throw-away ``AIRFLOW_HOME``: Airflow reads its configuration once per process,
on first import, and parsing must not depend on (or write to) a developer's own Airflow home.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cdclake import airflow_home

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
DAG_FILES = sorted(p for p in DAGS.glob("*.py") if not p.name.startswith("_"))
HEAVY_MODULES = ("pyspark", "great_expectations", "pandas", "pyiceberg", "pyarrow", "py4j")

_DESCRIBE_DAGBAG = """
import json, sys
from airflow.dag_processing.dagbag import DagBag

bag = DagBag(dag_folder=sys.argv[1])
out = {"import_errors": {str(k): str(v) for k, v in bag.import_errors.items()}, "dags": {}}
for dag_id, dag in bag.dags.items():
    out["dags"][dag_id] = {
        "fileloc": dag.fileloc,
        "tags": sorted(dag.tags),
        "doc_md": dag.doc_md,
        "catchup": dag.catchup,
        "max_active_runs": dag.max_active_runs,
        "params": {k: {"default": dag.params.get_param(k).value,
                       "description": dag.params.get_param(k).description,
                       "schema": dag.params.get_param(k).schema} for k in dag.params},
        "tasks": {t.task_id: {"owner": t.owner, "retries": t.retries,
                              "retry_delay": t.retry_delay.total_seconds(),
                              "upstream": sorted(t.upstream_task_ids),
                              "operator": type(t).__name__} for t in dag.tasks},
    }
print("DAGBAG-JSON " + json.dumps(out, default=str))
"""

_IMPORT_DAG_FILE = """
import importlib.util, json, sys

path = sys.argv[1]
spec = importlib.util.spec_from_file_location("dag_under_test", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2].split(",")))
print("MODULES-JSON " + json.dumps(heavy))
"""

_BROKEN_SOURCES_DAGBAG = """
import json, logging, sys
from airflow.dag_processing.dagbag import DagBag

logged = []
handler = logging.Handler(logging.ERROR)
handler.emit = lambda record: logged.append(record.getMessage())
logging.getLogger().addHandler(handler)
bag = DagBag(dag_folder=sys.argv[1])
out = {"import_errors": {str(k): str(v) for k, v in bag.import_errors.items()}, "logged": logged, "dags": {}}
for dag_id, dag in bag.dags.items():
    out["dags"][dag_id] = {"tags": sorted(dag.tags), "schedule": str(dag.schedule), "doc_md": dag.doc_md,
                           "description": dag.description, "tasks": {}}
    for t in dag.tasks:
        failed = None
        if "config-error" in dag.tags:
            try:
                t.python_callable()
            except Exception as exc:
                failed = {"type": type(exc).__name__, "message": str(exc)}
        out["dags"][dag_id]["tasks"][t.task_id] = {"owner": t.owner, "failed": failed}
print("DAGBAG-JSON " + json.dumps(out, default=str))
"""


def _run_python(code: str, args: list[str], home: Path, marker: str,
                extra_env: dict[str, str | None] | None = None) -> Any:
    """Run Python code in a subprocess with its own Airflow home; return the JSON it printed after ``marker``."""
    env = airflow_home.airflow_env(home)
    for key, value in (extra_env or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    airflow_home.write_config(home)
    proc = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(marker + " ")), None)
    assert line is not None, f"no {marker} line in output:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(line[len(marker) + 1:])


@pytest.fixture(scope="module")
def dagbag(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What Airflow's DagBag made of dags/: import errors and, per DAG, the properties checked here."""
    return _run_python(_DESCRIBE_DAGBAG, [str(DAGS)], tmp_path_factory.mktemp("airflow"), "DAGBAG-JSON")


def test_dags_folder_has_dag_files() -> None:
    assert DAG_FILES, f"no DAG files in {DAGS}"


def test_no_import_errors(dagbag: dict[str, Any]) -> None:
    assert dagbag["import_errors"] == {}


def test_every_file_defines_the_dag_named_after_it(dagbag: dict[str, Any]) -> None:
    # A generating file (cdclake_sources.py) defines `<file name>__<name>` DAGs, one per config file.
    by_file: dict[str, set[str]] = {}
    for dag_id, d in dagbag["dags"].items():
        by_file.setdefault(Path(d["fileloc"]).name, set()).add(dag_id)
    for path in DAG_FILES:
        ids = by_file.get(path.name, set())
        assert ids, f"{path.name} defines no DAG"
        assert all(i == path.stem or i.startswith(path.stem + "__") for i in ids), \
            f"{path.name} should define the DAG {path.stem!r} (or generated {path.stem}__<name> DAGs), not {ids}"


def test_one_ingestion_dag_per_source_config(dagbag: dict[str, Any]) -> None:
    from cdclake.config import load_sources

    sources = load_sources()
    assert {i for i in dagbag["dags"] if i.startswith("cdclake_sources__")} == {c.dag_id for c in sources.values()}
    for config in sources.values():
        dag = dagbag["dags"][config.dag_id]
        assert f"source:{config.name}" in dag["tags"]
        assert dag["max_active_runs"] == 1
        tasks = dag["tasks"]
        assert {t: v["upstream"] for t, v in tasks.items()} == {
            "land_batch": [],
            "normalize_batch": ["land_batch"],
            "apply_table": ["normalize_batch"],
            "validate_table": ["apply_table"],
            "mark_applied": ["apply_table", "land_batch"],
            # A source that lands from Kafka records its lag as a data-quality result.
            **({"check_kafka_lag": ["land_batch"]} if config.kafka is not None else {}),
        }
        assert "ShortCircuit" in tasks["land_batch"]["operator"]
        assert tasks["apply_table"]["operator"] == tasks["validate_table"]["operator"] == "DecoratedMappedOperator"
        assert all(t["retries"] == config.retries for t in tasks.values())


@pytest.mark.parametrize("file_name", [p.name for p in DAG_FILES])
def test_dag_is_documented_tagged_owned_and_retries(dagbag: dict[str, Any], file_name: str) -> None:
    dags = {i: d for i, d in dagbag["dags"].items() if Path(d["fileloc"]).name == file_name}
    assert dags, f"{file_name} defines no DAG"
    for dag_id, dag in dags.items():
        assert dag["tags"], f"{dag_id} has no tags"
        assert dag["doc_md"] and dag["doc_md"].strip(), f"{dag_id} has no doc_md"
        for task_id, task in dag["tasks"].items():
            assert task["owner"] and task["owner"] != "airflow", f"{dag_id}.{task_id} has the default owner"
            assert task["retries"] >= 1, f"{dag_id}.{task_id} has retries={task['retries']}"


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.name)
def test_parsing_the_dag_file_imports_no_heavy_module(path: Path, tmp_path: Path) -> None:
    heavy = _run_python(_IMPORT_DAG_FILE, [str(path), ",".join(HEAVY_MODULES)], tmp_path / "airflow",
                        "MODULES-JSON")
    assert heavy == [], f"parsing {path.name} imported {heavy}"


def test_cdclake_ingest_runs_land_normalize_apply_validate_in_order(dagbag: dict[str, Any]) -> None:
    tasks = dagbag["dags"]["cdclake_ingest"]["tasks"]
    assert {t: v["upstream"] for t, v in tasks.items()} == {
        "land_batch": [],
        "normalize_batch": ["land_batch"],
        "apply_changes": ["normalize_batch"],
        "validate_tables": ["apply_changes"],
    }
    # Landing nothing new must skip the rest of the run.
    assert "ShortCircuit" in tasks["land_batch"]["operator"]
    assert all(t["retries"] == 2 and t["retry_delay"] <= 120 for t in tasks.values())


def test_cdclake_ingest_schedule_settings(dagbag: dict[str, Any]) -> None:
    dag = dagbag["dags"]["cdclake_ingest"]
    assert dag["catchup"] is False
    assert dag["max_active_runs"] == 1
    assert dag["doc_md"].lstrip().startswith("### cdclake_ingest")


@pytest.mark.parametrize(("env", "lake", "inbox", "policy"), [
    ({"CDCLAKE_LAKE": None, "CDCLAKE_INBOX": None, "CDCLAKE_DQ_POLICY": None}, "lake", "", "fail"),
    ({"CDCLAKE_LAKE": "/data/lake", "CDCLAKE_INBOX": "s3://bucket/inbox", "CDCLAKE_DQ_POLICY": "t.x=warn"},
     "/data/lake", "s3://bucket/inbox", "t.x=warn"),
], ids=["unset", "from-env"])
def test_cdclake_ingest_params_have_descriptions_and_defaults(
    tmp_path: Path, env: dict[str, str | None], lake: str, inbox: str, policy: str
) -> None:
    # The defaults of lake and inbox come from the environment the DAG is parsed in.
    bag = _run_python(_DESCRIBE_DAGBAG, [str(DAGS)], tmp_path / "airflow", "DAGBAG-JSON", env)
    params = bag["dags"]["cdclake_ingest"]["params"]
    assert {k: v["default"] for k, v in params.items()} == {
        "source": "demo", "format": "debezium", "inbox": inbox, "lake": lake, "keys": [], "dq_policy": policy,
    }
    assert all(v["description"] for v in params.values()), params
    assert params["keys"]["schema"]["type"] == "array"


def test_local_airflow_home_registers_every_dag(tmp_path: Path) -> None:
    home = tmp_path / "airflow"
    env = airflow_home.prepare(home)
    proc = subprocess.run([*airflow_home.airflow_command(), "dags", "list", "-o", "json"], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    listed = json.loads(next(ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("[")))
    expected = {p.stem for p in DAG_FILES if p.stem != "cdclake_sources"}
    from cdclake.config import load_sources

    expected |= {c.dag_id for c in load_sources().values()}
    assert {d["dag_id"] for d in listed} == expected
    assert all(d["is_paused"] in (True, "True") for d in listed), "DAGs must start paused"

    # Set up once: a second call neither migrates again nor changes the secrets.
    marker, config = home / ".cdclake-migrated", (home / "airflow.cfg").read_text()
    stamp = marker.stat().st_mtime_ns
    assert airflow_home.prepare(home) == env
    assert marker.stat().st_mtime_ns == stamp
    assert (home / "airflow.cfg").read_text() == config


def test_cdclake_replay_is_manual_and_its_form_explains_every_field(dagbag: dict[str, Any]) -> None:
    from cdclake.config import load_sources

    params = dagbag["dags"]["cdclake_replay"]["params"]
    assert set(params) == {"source", "mode", "tables", "batch_from", "batch_to", "time_from", "time_to", "reason",
                           "ddl_policy"}
    assert all(p["description"] and p["schema"].get("title") for p in params.values()), params
    assert params["mode"]["schema"]["enum"] == ["replay", "resnapshot", "quarantine-replay"]
    assert params["source"]["schema"]["enum"] == sorted(load_sources())


def test_cdclake_maintenance_maps_one_task_per_table(dagbag: dict[str, Any]) -> None:
    tasks = dagbag["dags"]["cdclake_maintenance"]["tasks"]
    assert {t: v["upstream"] for t, v in tasks.items()} == {
        "list_tables": [], "maintain_table": ["list_tables"], "report": ["maintain_table"]}
    assert tasks["maintain_table"]["operator"] == "DecoratedMappedOperator"


def test_an_invalid_source_file_becomes_a_failing_placeholder_dag_and_spares_the_others(tmp_path: Path) -> None:
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "good.yaml").write_text("name: good\nformat: debezium\ninbox: inbox/good\n")
    (sources / "bad.yaml").write_text("name: bad\nformat: debezium\ninbox: inbox/bad\n"
                                      "defaults:\n  delete_mode: purge\n")
    # A file whose DAG id would be a valid source's (its stem's space becomes _) must not replace that DAG.
    (sources / "good_too.yaml").write_text("name: good_too\nformat: canal\ninbox: inbox/good_too\n")
    (sources / "good too.yaml").write_text("name: good_too\nformat: canal\ninbox: x\n")
    bag = _run_python(_BROKEN_SOURCES_DAGBAG, [str(DAGS / "cdclake_sources.py")], tmp_path / "airflow", "DAGBAG-JSON",
                      {"CDCLAKE_SOURCES_DIR": str(sources)})
    assert bag["import_errors"] == {}
    dags = bag["dags"]
    assert set(dags) == {"cdclake_sources__good", "cdclake_sources__good_too", "cdclake_sources__bad",
                         "cdclake_sources__good_too__config_error"}
    for good in ("cdclake_sources__good", "cdclake_sources__good_too"):
        assert set(dags[good]["tasks"]) == {"land_batch", "normalize_batch", "apply_table", "validate_table",
                                            "mark_applied"}
        assert "config-error" not in dags[good]["tags"]

    placeholder = dags["cdclake_sources__bad"]
    assert placeholder["tags"] == ["cdclake", "config-error"] and placeholder["schedule"] == "None"
    fragments = [f"{sources / 'bad.yaml'}:5: field defaults.delete_mode", "'hard' or 'soft'", "'purge'"]
    assert all(f in placeholder["doc_md"] and f in placeholder["description"] for f in fragments), placeholder
    assert list(placeholder["tasks"]) == ["config_error"]
    task = placeholder["tasks"]["config_error"]
    assert task["owner"] == "cdclake" and task["failed"]["type"] == "AirflowFailException"
    assert all(f in task["failed"]["message"] for f in fragments), task
    assert any(all(f in line for f in fragments) for line in bag["logged"]), bag["logged"]

    collided = dags["cdclake_sources__good_too__config_error"]
    assert "good too.yaml:1: field name" in collided["tasks"]["config_error"]["failed"]["message"]
