"""The repo's dagster.yaml and its production variant, loaded by Dagster itself."""

import shutil

import dagster as dg
from dagster._core.instance.config import dagster_instance_config
from dagster._core.instance.ref import InstanceRef

from fw_assets_tests.dagster_services import REPO_ROOT

PRODUCTION_YAML = REPO_ROOT / "fw_assets" / "deploy" / "dagster.production.yaml"


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
        assert concurrency.pool_config.default_pool_limit == 1
        assert instance.run_monitoring_enabled
        assert not instance.telemetry_enabled
    assert (tmp_path / ".dagster" / "history" / "runs.db").exists()
    assert not list((tmp_path / "scratch").rglob("*.db"))


def test_the_production_variant_is_valid_instance_config(tmp_path, monkeypatch):
    for name in ("DAGSTER_PG_HOST", "DAGSTER_PG_USERNAME", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_DB"):
        monkeypatch.setenv(name, "set-by-the-deployment")
    shutil.copy(PRODUCTION_YAML, tmp_path / "dagster.yaml")
    config, _ = dagster_instance_config(str(tmp_path))  # raises on any key Dagster does not know
    assert "postgres" in config["storage"]
    assert config["run_launcher"]["class"] == "K8sRunLauncher"
    assert config["run_monitoring"]["enabled"]
