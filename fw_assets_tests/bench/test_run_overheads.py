"""The deployment's overheads read from Dagster's records (bench/run_overheads.py): a run's phases
from its events, tags and step stats, the latencies between runs, and the medians the model takes."""

from dataclasses import asdict

import pytest

from bench.run_overheads import (
    DECISIONS,
    SCORING,
    SIGNING,
    Overheads,
    RunRecord,
    Spread,
    phase_spreads,
    ready_to_created,
    start_latencies,
    step_spreads,
    tick_latencies,
)
from fw_assets_tests.support.graphql_runs import BOOT, graphql_run

KINDS = {SIGNING: {"raw", "minhash"}, DECISIONS: {"deduplicated", "tokenized"}, SCORING: {"probe_loss"}}
def record(run: dict) -> RunRecord:
    return RunRecord.from_graphql(run, KINDS, boot_time=BOOT)


def test_a_runs_phases_from_its_events_its_process_start_and_its_steps():
    steps = {"raw": (2013.5, 2015.0), "minhash": (2015.2, 2018.0)}
    run = record(graphql_run("r1", "CC-MAIN-2013-20", "worker-1", created=2000.0, starting=2010.0, process=2010.5,
                             started=2013.0, steps=steps, ended=2018.25))
    assert run.kind == SIGNING and run.dump == "CC-MAIN-2013-20" and run.host == "worker-1"
    assert run.phases() == pytest.approx({
        "queued": 10.0, "to the worker": 0.5, "run process start": 2.5, "setup": 0.5, "steps": 4.5,
        "between steps": 0.2, "teardown": 0.25, "run": 5.25, "created → ended": 18.25,
    })


def test_a_run_is_of_the_kind_whose_steps_hold_all_of_its_own_else_of_its_job():
    steps = {"deduplicated": (1.0, 2.0), "tokenized": (2.0, 3.0)}
    assert record(graphql_run("d", "x", "h", 0, steps, 0, 0.5, 1, 3)).kind == DECISIONS
    mixed = graphql_run("m", "x", "h", 0, {**steps, "raw": (0.5, 1.0)}, 0, 0.5, 1, 3)
    assert record(mixed).kind == "__ASSET_JOB"


def test_a_phase_whose_moments_were_not_recorded_is_left_out():
    run = graphql_run("q", "x", "h", 100.0, {}, 0, 0, 0, 0, status="QUEUED")
    run.update(startTime=None, endTime=None, tags=[], eventConnection={"events": []})
    assert record(run).phases() == {}


def test_start_latency_counts_from_the_later_of_creation_and_the_previous_run_on_the_host():
    runs = [
        record(graphql_run("a", "d1", "w1", created=0, steps={}, starting=1, process=1.5, started=3, ended=10)),
        # created while "a" ran: waits for the worker, starts 4 s after "a" ended
        record(graphql_run("b", "d2", "w1", created=5, steps={}, starting=12, process=12.5, started=14, ended=20)),
        # created after "b" ended: counted from its creation
        record(graphql_run("c", "d3", "w1", created=30, steps={}, starting=31, process=31.5, started=33, ended=40)),
        record(graphql_run("d", "d4", "w2", created=0, steps={}, starting=1, process=1.5, started=2, ended=8)),
    ]
    assert sorted(start_latencies(runs)) == [2, 3, 3, 4]


def test_ready_counts_from_the_last_signing_of_the_dump_or_any_earlier_one():
    def signing(dump: str, ended: float) -> RunRecord:
        return record(graphql_run(f"s-{dump}", dump, "w", 0, {"raw": (1, ended)}, 0, 0.5, 1, ended))

    def deciding(run_id: str, dump: str, created: float) -> RunRecord:
        return record(graphql_run(run_id, dump, "w", created, {"tokenized": (created + 2, created + 3)},
                                  created + 1, created + 1.5, created + 2, created + 3))

    runs = [signing("A", 10), signing("B", 30), signing("C", 20),
            deciding("dA", "A", 12), deciding("dB", "B", 35), deciding("dC", "C", 40), deciding("dA2", "A", 90)]
    # C was signed at 20 but B, earlier, only at 30; A's second decisions are not its first
    assert ready_to_created(runs) == {"A": 2, "B": 5, "C": 10}


def test_an_evaluations_latency_to_its_first_run_and_between_the_runs_it_creates():
    created = (("a", 103), ("b", 104), ("c", 105.5))
    runs = [record(graphql_run(run_id, "x", "w", at, {}, at, at, at, at)) for run_id, at in created]
    ticks = [{"timestamp": 100.0, "runIds": ["b", "a", "c"]}, {"timestamp": 200.0, "runIds": []}]
    first, between = tick_latencies(runs, ticks)
    assert first == [3] and between == [1, 1.5]


def test_the_overheads_for_the_model_are_medians_over_the_successful_runs():
    runs = [
        record(graphql_run(f"r{i}", f"d{i}", f"w{i}", created=0, steps={"raw": (1 + setup, 5), "minhash": (5, 6)},
                           starting=0.5, process=0.6, started=1, ended=6 + teardown))
        for i, (setup, teardown) in enumerate([(0.1, 0.2), (0.3, 0.4), (0.2, 0.3)])
    ]
    failed = record(graphql_run("f", "d9", "w9", 0, {"raw": (5, 6)}, 0.5, 0.6, 1, 9, status="FAILURE"))
    ticks = [{"timestamp": -1.0, "runIds": ["r0", "r1", "r2"]}]
    overheads = Overheads.measured([*runs, failed], ticks, (SIGNING,))
    assert asdict(overheads) == pytest.approx({"start_latency": 1, "setup": 0.2, "between_steps": 0, "teardown": 0.3,
                                               "first_request": 1, "per_request": 0})
    assert asdict(phase_spreads(runs, SIGNING)["setup"]) == pytest.approx(
        {"median": 0.2, "low": 0.1, "high": 0.3, "count": 3})
    assert list(step_spreads(runs, SIGNING)) == ["raw", "minhash"]


def test_a_spread_of_nothing_is_none():
    assert Spread.of([]) is None
    assert Spread.of([3.0, 1.0, 2.0]) == Spread(2.0, 1.0, 3.0, 3)
