"""The Celery arrivals bench (bench/celery_arrivals.py): which kind of run a run is, from the steps
the deployment's definitions give each kind."""

from bench.celery_arrivals import step_kinds
from bench.run_overheads import DECISIONS, SCORING, SIGNING, RunRecord
from fw_assets_tests.support.graphql_runs import graphql_run


def test_a_run_with_its_assets_published_files_check_steps_is_still_of_its_kind():
    kinds = step_kinds()
    runs = {
        SIGNING: ("raw", "sampled", "sampled_published_files", "bucketed", "bucketed_published_files", "minhash",
                  "minhash_published_files", "band_key_index"),
        DECISIONS: ("deduplicated", "deduplicated_published_files", "tokenized", "tokenized_published_files"),
        SCORING: ("probe_loss", "probe_loss_published_files"),
    }
    for kind, steps in runs.items():
        run = graphql_run("r", "CC-MAIN-2013-20", "worker-1", 10.0, {step: (20.0, 21.0) for step in steps},
                          starting=11.0, process=12.0, started=13.0, ended=30.0)
        assert RunRecord.from_graphql(run, kinds).kind == kind
