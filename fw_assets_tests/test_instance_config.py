"""The repo's dagster.yaml, the production instance (deploy/dagster.postgres.yaml) and the Helm values
(deploy/values.yaml), loaded and checked by Dagster itself. The production instance runs for real on
PostgreSQL in test_postgres_e2e.py; Helm cannot run here, so the values are checked by rendering the
instance settings the chart writes from them and validating those with Dagster and dagster-k8s."""

import shutil

import dagster as dg
import pytest
import yaml
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config
from dagster._core.instance.ref import InstanceRef

from bench.dagster_services import REPO_ROOT

PRODUCTION_YAML = REPO_ROOT / "deploy" / "dagster.postgres.yaml"
CELERY_YAML = REPO_ROOT / "deploy" / "celery" / "dagster.yaml"
HELM_VALUES = REPO_ROOT / "deploy" / "values.yaml"
PG_VARIABLES = ("DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_USERNAME", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_DB")


def test_started_from_a_folder_the_instance_keeps_its_history_in_that_folders_dagster_dir(
    tmp_path, monkeypatch
):
    # What `dagster dev` / `dagster asset materialize` do from the repo root with DAGSTER_HOME unset.
    monkeypatch.chdir(tmp_path)
    ref = InstanceRef.from_dir(str(tmp_path / "scratch"), config_dir=str(REPO_ROOT))
    with dg.DagsterInstance.from_ref(ref) as instance:
        assert instance.get_runs_count() == 0
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        concurrency = instance.get_concurrency_config()
        assert concurrency.run_queue_config.max_concurrent_runs == 2
        # one run at a time per dump, whoever launched it
        assert concurrency.run_queue_config.tag_concurrency_limits == [
            {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
        ]
        assert concurrency.pool_config.default_pool_limit == 1
        assert instance.run_monitoring_enabled
        assert not instance.telemetry_enabled
    assert (tmp_path / ".dagster" / "history" / "runs.db").exists()
    assert not list((tmp_path / "scratch").rglob("*.db"))


def load_production_config(folder, monkeypatch) -> dict:
    for name in PG_VARIABLES:
        monkeypatch.setenv(name, "5432" if name == "DAGSTER_PG_PORT" else "set-by-the-deployment")
    shutil.copy(PRODUCTION_YAML, folder / "dagster.yaml")
    config, _ = dagster_instance_config(str(folder))  # raises on any key Dagster does not know
    return config


def test_the_production_instance_is_the_single_machine_one_on_postgres(tmp_path, monkeypatch):
    production = load_production_config(tmp_path, monkeypatch)
    single_machine = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
    assert production["storage"]["postgres"]["postgres_db"]["scheme"] == "postgresql+psycopg2"
    for key in ("run_coordinator", "concurrency", "run_monitoring"):
        assert production[key] == single_machine[key], key
    # Nothing only a cluster has: the CLI must load it anywhere.
    assert "run_launcher" not in production


def test_the_production_instance_reads_every_dagster_pg_variable():
    database = yaml.safe_load(PRODUCTION_YAML.read_text())["storage"]["postgres"]["postgres_db"]
    assert sorted(value["env"] for value in database.values() if isinstance(value, dict)) == sorted(PG_VARIABLES)


def chart_instance_settings(values: dict) -> dict:
    """The part of dagster.yaml that the dagster/dagster chart writes from these values (its
    templates configmap-instance.yaml, _concurrency.tpl, _run-launcher.tpl, _postgresql.tpl)."""
    postgresql, daemon = values["postgresql"], values["dagsterDaemon"]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    snake = {"startTimeoutSeconds": "start_timeout_seconds", "cancelTimeoutSeconds": "cancel_timeout_seconds",
             "maxResumeRunAttempts": "max_resume_run_attempts", "pollIntervalSeconds": "poll_interval_seconds",
             "freeSlotsAfterRunEndSeconds": "free_slots_after_run_end_seconds", "enabled": "enabled",
             "maxRetries": "max_retries", "retryOnAssetOrOpFailure": "retry_on_asset_or_op_failure"}
    pools, runs = values["concurrency"]["pools"], values["concurrency"]["runs"]
    return {
        "storage": {"postgres": {"postgres_db": {
            "username": postgresql["postgresqlUsername"], "password": {"env": "DAGSTER_PG_PASSWORD"},
            "hostname": postgresql["postgresqlHost"], "db_name": postgresql["postgresqlDatabase"],
            "port": postgresql["service"]["port"], "scheme": postgresql["postgresqlScheme"]}}},
        "run_coordinator": {"module": "dagster.core.run_coordinator", "class": daemon["runCoordinator"]["type"]},
        "concurrency": {"pools": {"granularity": pools["granularity"], "default_limit": pools["defaultLimit"]},
                        "runs": {"max_concurrent_runs": runs["maxConcurrentRuns"],
                                 "tag_concurrency_limits": runs["tagConcurrencyLimits"]}},
        "run_monitoring": {snake[key]: value for key, value in daemon["runMonitoring"].items()},
        "run_retries": {snake[key]: value for key, value in daemon["runRetries"].items()},
        "run_launcher": {"module": "dagster_k8s", "class": values["runLauncher"]["type"], "config": {
            "load_incluster_config": launcher["loadInclusterConfig"],
            "job_namespace": launcher["jobNamespace"],
            "image_pull_policy": launcher["imagePullPolicy"],
            "service_account_name": values["global"]["serviceAccountName"],
            "dagster_home": {"env": "DAGSTER_HOME"},
            "instance_config_map": {"env": "DAGSTER_K8S_INSTANCE_CONFIG_MAP"},
            "postgres_password_secret": {"env": "DAGSTER_K8S_PG_PASSWORD_SECRET"},
            "env_config_maps": [{"env": "DAGSTER_K8S_PIPELINE_RUN_ENV_CONFIGMAP"},
                                *(source["name"] for source in launcher["envConfigMaps"])],
            "volumes": launcher["volumes"],
            "volume_mounts": launcher["volumeMounts"],
            "fail_pod_on_run_failure": launcher["failPodOnRunFailure"],
            "run_k8s_config": {"container_config": launcher["runK8sConfig"]["containerConfig"]},
        }},
    }


@pytest.mark.needs_extra("k8s")
def test_the_helm_values_give_valid_instance_settings_for_dagster_and_dagster_k8s(tmp_path, monkeypatch):
    values = yaml.safe_load(HELM_VALUES.read_text())
    settings = chart_instance_settings(values)
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", "from-the-secret")
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(settings))
    config, _ = dagster_instance_config(str(tmp_path))
    for name in ("DAGSTER_HOME", "DAGSTER_K8S_INSTANCE_CONFIG_MAP", "DAGSTER_K8S_PG_PASSWORD_SECRET",
                 "DAGSTER_K8S_PIPELINE_RUN_ENV_CONFIGMAP"):
        monkeypatch.setenv(name, "set-by-the-chart")
    from dagster_k8s import K8sRunLauncher

    launcher = process_config(K8sRunLauncher.config_type(), config["run_launcher"]["config"])
    assert launcher.success, launcher.errors
    assert "fw-assets-env" in launcher.value["env_config_maps"]
    assert launcher.value["volume_mounts"][0]["mountPath"] == "/data/fineweb"


def test_the_helm_values_keep_the_production_instances_settings_and_retry_runs_whose_pod_was_lost(
    tmp_path, monkeypatch
):
    values = yaml.safe_load(HELM_VALUES.read_text())
    cluster, production = chart_instance_settings(values), load_production_config(tmp_path, monkeypatch)
    database = cluster["storage"]["postgres"]["postgres_db"]
    assert database["scheme"] == production["storage"]["postgres"]["postgres_db"]["scheme"]
    assert cluster["concurrency"]["pools"]["granularity"] == production["concurrency"]["pools"]["granularity"]
    runs = "tag_concurrency_limits"  # one run at a time per dump, on the cluster too
    assert cluster["concurrency"]["runs"][runs] == production["concurrency"]["runs"][runs]
    assert set(cluster["run_monitoring"]) == set(production["run_monitoring"]) | {"max_resume_run_attempts"}
    # A lost run is failed and retried as on Celery workers (deploy/celery/dagster.yaml).
    celery = yaml.safe_load(CELERY_YAML.read_text())
    for key in ("max_resume_run_attempts", "poll_interval_seconds"):
        assert cluster["run_monitoring"][key] == celery["run_monitoring"][key], key
    assert cluster["run_retries"] == celery["run_retries"]
    assert values["dagsterDaemon"]["env"]["DAGSTER_BACKFILL_RETRY_DEFINITION_CHANGED_ERROR"] == "1"
    deployment = values["dagster-user-deployments"]["deployments"][0]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    # The sensor (code location) and the run pods see the dumps at the same path.
    for key in ("envConfigMaps", "volumes", "volumeMounts"):
        assert deployment[key] == launcher[key], key


def test_the_helm_values_hold_no_password_and_take_postgresqls_from_a_secret():
    values = yaml.safe_load(HELM_VALUES.read_text())

    def settings(node, path=""):
        if isinstance(node, dict):
            for key, value in node.items():
                yield from settings(value, f"{path}.{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                yield from settings(value, f"{path}[{index}]")
        else:
            yield path, node

    passwords = {path: value for path, value in settings(values) if "password" in path.lower()}
    assert passwords == {".generatePostgresqlPasswordSecret": False}  # a switch, no password
    assert values["global"]["postgresqlSecretName"] == "dagster-postgresql-secret"
    assert values["redis"]["enabled"] is False  # runs are pods: no Redis, no password for it
