"""The jobs' runs: every probe_losses run goes to the GPU host's Celery queue when one is named."""

import json
import os
import subprocess
import sys

import pytest

from fw_assets import settings

SHOW_PROBE_JOB_TAGS = (
    "import json; from fw_assets.definitions import defs; "
    "print(json.dumps(defs.resolve_job_def('probe_losses').tags))"
)


def probe_job_tags(**env: str) -> dict:
    completed = subprocess.run([sys.executable, "-c", SHOW_PROBE_JOB_TAGS], env={**os.environ, **env},
                               capture_output=True, text=True, check=True, timeout=120)
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.mark.needs_extra("celery")
def test_probe_losses_runs_go_to_the_named_queue_and_otherwise_where_a_dumps_run_goes():
    from fw_assets.deploy.celery_launcher import run_queue

    queues = {"dump": "dumps", "recipe": "recipes"}
    named = probe_job_tags(**{settings.PROBE_QUEUE_ENV: "probes"})
    assert run_queue({**named, "dagster/partition": "CC-MAIN-2013-20"}, queues, "dumps") == "probes"
    unnamed = probe_job_tags(**{settings.PROBE_QUEUE_ENV: ""})
    assert run_queue({**unnamed, "dagster/partition": "CC-MAIN-2013-20"}, queues, "dumps") == "dumps"
