"""The Celery deployment's instance (deploy/celery/dagster.yaml) as Dagster loads it, and where its
launcher sends each run: the production instance on PostgreSQL, with runs on Celery workers, run
monitoring telling lost hosts by heartbeats, and run retries."""

import shutil

import dagster as dg
import pytest
import yaml
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config

from bench.dagster_services import REPO_ROOT

CELERY_YAML = REPO_ROOT / "deploy" / "celery" / "dagster.yaml"
PRODUCTION_YAML = REPO_ROOT / "deploy" / "dagster.postgres.yaml"
ENVIRONMENT = {
    "DAGSTER_PG_HOST": "db", "DAGSTER_PG_PORT": "5432", "DAGSTER_PG_USERNAME": "fw", "DAGSTER_PG_PASSWORD": "pw",
    "DAGSTER_PG_DB": "fw", "FW_REDIS_URL": "redis://redis-host:6379/0",
}


@pytest.fixture
def launcher_module():
    """fw_assets.deploy.celery_launcher: its tests are marked needs_extra("celery")."""
    from fw_assets.deploy import celery_launcher

    return celery_launcher


@pytest.fixture
def celery_config(tmp_path, monkeypatch) -> dict:
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    shutil.copy(CELERY_YAML, tmp_path / "dagster.yaml")
    config, _ = dagster_instance_config(str(tmp_path))  # raises on any key Dagster does not know
    return config


def test_the_celery_instance_is_the_production_one_with_its_runs_on_celery_workers(celery_config):
    production = yaml.safe_load(PRODUCTION_YAML.read_text())
    assert celery_config["storage"] == production["storage"]
    assert celery_config["run_coordinator"] == production["run_coordinator"]
    for key in ("tag_concurrency_limits",):  # one run at a time per dump, on whichever host
        assert celery_config["concurrency"]["runs"][key] == production["concurrency"]["runs"][key]
    assert celery_config["concurrency"]["pools"] == production["concurrency"]["pools"]
    assert celery_config["run_launcher"]["class"] == "HeartbeatCeleryRunLauncher"


def test_a_run_whose_host_was_lost_is_failed_by_run_monitoring_and_retried(celery_config):
    monitoring, retries = celery_config["run_monitoring"], celery_config["run_retries"]
    assert monitoring["enabled"] and monitoring["max_resume_run_attempts"] == 0
    assert retries == {"enabled": True, "max_retries": 2, "retry_on_asset_or_op_failure": False}
    launcher = celery_config["run_launcher"]["config"]
    # failed within lost_after + poll_interval: the figure docs/operations-more-than-one-machine.md gives
    assert launcher["lost_after_seconds"] + monitoring["poll_interval_seconds"] == 40


@pytest.mark.needs_extra("celery")
def test_the_launcher_loads_from_the_instance_config_with_redis_as_broker_and_backend(celery_config, launcher_module):
    config = celery_config["run_launcher"]["config"]
    processed = process_config(launcher_module.HeartbeatCeleryRunLauncher.config_type(), config)
    assert processed.success, processed.errors
    launcher = launcher_module.HeartbeatCeleryRunLauncher.from_config_value(None, processed.value)
    assert launcher.celery.conf.broker_url == launcher.celery.conf.result_backend == ENVIRONMENT["FW_REDIS_URL"]
    assert launcher.heartbeat_client().connection_pool.connection_kwargs["host"] == "redis-host"
    assert launcher.queues == {"dump": "dumps", "recipe": "recipes"}
    assert not launcher.supports_resume_run


@pytest.mark.needs_extra("celery")
def test_a_heartbeat_slower_than_the_time_to_lost_is_refused(launcher_module):
    with pytest.raises(dg.DagsterInvariantViolationError, match="heartbeat_seconds .30. must be above 0 and below"):
        launcher_module.HeartbeatCeleryRunLauncher(heartbeat_seconds=30, lost_after_seconds=30, default_queue="dumps")


@pytest.mark.needs_extra("celery")
@pytest.mark.parametrize(
    ("tags", "queue"),
    [
        ({"dagster/partition": "CC-MAIN-2013-20"}, "dumps"),
        ({"dagster/partition": "fineweb_edu_1t"}, "recipes"),
        ({}, "default"),
        ({"dagster/partition": "CC-MAIN-2013-20", "dagster-celery/queue": "gpu"}, "gpu"),
    ],
)
def test_a_run_goes_to_the_queue_of_its_partitions_kind_unless_its_tag_names_one(launcher_module, tags, queue):
    assert launcher_module.run_queue(tags, {"dump": "dumps", "recipe": "recipes"}, "default") == queue


@pytest.mark.needs_extra("celery")
def test_a_missing_heartbeat_is_timed_from_the_first_look_that_missed_it(launcher_module, monkeypatch):
    clock = iter([100.0, 104.0, 111.0])
    monkeypatch.setattr(launcher_module.time, "monotonic", lambda: next(clock))
    missing = launcher_module.MissingHeartbeats()
    assert missing.seen("run", missing=True) == (0.0, True)
    assert missing.seen("run", missing=True) == (4.0, False)
    assert missing.seen("run", missing=False) == (0.0, False)  # written again: the absence is over
    assert missing.seen("run", missing=True) == (0.0, True)


@pytest.mark.needs_extra("celery")
def test_a_heartbeat_missing_on_another_machine_is_confirmed_for_two_beats(celery_config, launcher_module):
    config = celery_config["run_launcher"]["config"]
    launcher = launcher_module.HeartbeatCeleryRunLauncher.from_config_value(
        None, process_config(launcher_module.HeartbeatCeleryRunLauncher.config_type(), config).value
    )
    # lost within lost_after + poll + confirm: the figure docs/operations-more-than-one-machine.md gives
    poll = celery_config["run_monitoring"]["poll_interval_seconds"]
    assert launcher.lost_after_seconds + poll + launcher.confirm_after_seconds == 50
