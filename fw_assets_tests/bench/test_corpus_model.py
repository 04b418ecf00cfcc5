"""The corpus model (bench/corpus_model.py): runs packed on hosts, decisions in crawl order after the
automation's evaluation, Amdahl's law on a run's cores, a storage read rate shared by every host,
the deployment's overheads, and the command that prints it all."""

import json
import math
from dataclasses import replace

import pytest

from bench.corpus_model import (
    DECISIONS,
    KEPT,
    SCORING,
    SIGNING,
    SOURCE,
    Cluster,
    Corpus,
    EarlierDumps,
    Measured,
    Model,
    Overheads,
    Stage,
    decidable,
    main,
    max_min_fair,
    simulate,
)

NO_OVERHEADS = Overheads(start_latency=0, setup=0, between_steps=0, teardown=0, first_request=0, per_request=0)


def toy(dumps: int, signing: float = 10.0, deciding: float = 5.0, serial: float = 0.0, read: float = 0.0,
        scoring: float = 0.0, **model) -> Model:
    """Dumps of 1,000 source and 1,000 kept documents; each stage's CPU seconds on one dump, measured
    on a dump of that size."""
    stages = (Stage("signing", SIGNING, signing, SOURCE, read, serial),
              Stage("deciding", DECISIONS, deciding, KEPT, 0, 0), Stage("scoring", SCORING, scoring, KEPT, 0, 0))
    return Model(
        **{"corpus": Corpus(dumps, 1000 * dumps, 1000 * dumps, 0), "stages": stages, "measured": Measured(1000, 1000),
           "earlier_dumps": EarlierDumps(0, 0, 0), "overheads": NO_OVERHEADS, "automation_interval": 1,
           "scoring": scoring > 0, **model}
    )


def test_one_worker_runs_the_queue_first_created_first_and_decisions_wait_behind_the_signing():
    # S0 0-10, S1 10-20 (created at the launch, before D0 at 10), D0 20-25, D1 (created at 20) 25-30
    outcome = simulate(toy(2), Cluster(hosts=1, cores=1))
    assert (outcome.signing_ended, outcome.last_decisions_created, outcome.wall) == (20, 20, 30)


def test_a_dump_is_decided_only_once_it_and_every_earlier_dump_are_signed():
    assert decidable({0, 1, 3}) == {0, 1}
    assert decidable({1, 2}) == set()
    assert decidable(set()) == set()


def test_decisions_are_requested_at_the_automations_evaluation_after_the_signing():
    outcome = simulate(toy(1, automation_interval=30), Cluster(hosts=1, cores=1))
    assert (outcome.signing_ended, outcome.last_decisions_created, outcome.wall) == (10, 30, 35)


def test_a_run_pays_the_deployments_overheads_and_an_evaluation_creates_its_runs_one_after_another():
    overheads = Overheads(start_latency=2, setup=1, between_steps=0.5, teardown=0.5, first_request=3, per_request=4)
    # S0 created 3, starts working at 6, ends 16 + 1 = 17; S1 created 7, waits for the worker: 17 + 3 + 10 + 1 = 31.
    # Evaluations every second: D0 requested at 17, created 20, runs 31 + 3 + 5 + 1 = 40; D1 requested at 31,
    # created 34, runs 40 + 3 + 5 + 1 = 49.
    outcome = simulate(toy(2, overheads=overheads), Cluster(hosts=1, cores=1))
    assert (outcome.signing_ended, outcome.last_decisions_created, outcome.wall) == (31, 34, 49)


def test_amdahls_law_on_a_runs_cores_and_more_runs_per_host_when_steps_scale_poorly():
    model = toy(4, signing=8.0, deciding=4.0, serial=0.5)
    # one run per host on 4 cores: a signing run takes 8 × (0.5 + 0.5 / 4) = 5 s, one after another;
    # the decisions (serial share 0) take 1 s each, after the last signing run
    whole_host = simulate(model, Cluster(hosts=1, cores=4, runs_per_host=1))
    assert (whole_host.signing_ended, whole_host.wall) == (20, 24)
    # four runs of one core each: the four signing runs side by side, 8 s; then the decisions, 4 s
    packed = simulate(model, Cluster(hosts=1, cores=4, runs_per_host=4))
    assert (packed.signing_ended, packed.wall) == (8, 12)
    # with every core busy throughout (ideal), packing gains nothing on the signing
    ideal = simulate(replace(model, ideal=True), Cluster(hosts=1, cores=4, runs_per_host=1))
    assert ideal.signing_ended == 8


def test_the_storages_read_rate_is_shared_by_every_host_and_bounds_the_steps_that_read():
    # each signing run reads 100 bytes a document, 100,000 bytes, in 10 s with storage to spare
    model = toy(2, read=100.0)
    fast = simulate(model, Cluster(hosts=2, cores=1))
    assert fast.signing_ended == 10 and fast.signing_read_rate == pytest.approx(20_000)
    # at 5,000 bytes a second for both hosts, each reads at 2,500: 40 s
    slow = simulate(model, Cluster(hosts=2, cores=1, read_rate=5_000))
    assert slow.signing_ended == pytest.approx(40)
    assert slow.wall == pytest.approx(40 + 5)
    assert slow.signing_read_rate == pytest.approx(20_000), "the rate that makes it storage-bound, at any rate"


def test_max_min_fair_shares_give_no_claimant_more_than_it_asks():
    assert max_min_fair({"a": 1.0, "b": 5.0, "c": 5.0}, 6.0) == {"a": 1.0, "b": 2.5, "c": 2.5}
    assert max_min_fair({"a": 1.0, "b": 2.0}, math.inf) == {"a": 1.0, "b": 2.0}
    assert max_min_fair({}, 3.0) == {}


def test_scoring_follows_each_decided_dump_at_the_stale_losses_sensors_evaluation():
    outcome = simulate(toy(1, scoring=2.0), Cluster(hosts=1, cores=1))
    # signed by 10, decided 10-15, scored at the sensor's first evaluation after, at 60
    assert outcome.last_decisions_ended == 15 and outcome.wall == 62


def test_deciding_adds_the_cost_of_every_earlier_dump_it_reads():
    model = toy(5, earlier_dumps=EarlierDumps(cpu_seconds_per_document=0.001, read_bytes_per_document=400,
                                              serial_share=0))
    first, fourth = model.work(DECISIONS, 0, cores=1), model.work(DECISIONS, 3, cores=1)
    assert [w.stage for w in first] == ["deciding"]
    assert [(w.stage, w.cpu, w.read) for w in fourth[1:]] == [("deciding: earlier dumps", 3.0, 1_200_000)]


def test_bucketing_grows_with_the_source_documents_and_the_other_stages_with_the_kept_ones():
    model = Model(scoring=True)
    doubled = Model(corpus=Corpus(kept_documents=2 * model.corpus.kept_documents), scoring=True)
    before, after = model.stage_totals(), doubled.stage_totals()
    assert after["bucketing"] == before["bucketing"]
    for stage in ("signing", "deciding", "deciding: earlier dumps", "tokenizing", "scoring"):
        assert after[stage][0] == pytest.approx(2 * before[stage][0])


def test_the_corpus_is_no_faster_than_its_reads_at_the_storages_rate():
    model = Model()
    for rate in (2e9, 20e9):
        assert simulate(model, Cluster(16, 16, read_rate=rate)).wall >= model.read_bytes() / rate
    assert simulate(model, Cluster(64, 16)).wall <= simulate(model, Cluster(16, 16)).wall


def test_the_command_prints_each_steps_totals_and_a_row_per_cluster(capsys, tmp_path):
    result = tmp_path / "celery-arrivals.json"
    result.write_text(json.dumps({"overheads": {"start_latency": 1, "setup": 0, "between_steps": 0, "teardown": 0,
                                                "first_request": 0, "per_request": 0}}))
    main(["--hosts", "2x4", "--runs-per-host", "1", "2", "--read-gbps", "inf", "1", "--overheads", str(result),
          "--stage-cpu", "bucketing=110"])
    out = capsys.readouterr().out
    assert "start_latency=1" in out
    assert "| bucketing | 9.9 | 4.20 |" in out  # 110 CPU s per 4M documents, twice the table's 5.0 CPU-hours
    rows = [line for line in out.splitlines() if line.startswith("| 2 × 4 |")]
    assert len(rows) == 8  # 2 packings × 2 read rates × (ideal, Amdahl)
    assert any(row.startswith("| 2 × 4 | 2 × 2 | Amdahl | 1 |") for row in rows)


def test_the_command_refuses_a_stage_it_does_not_know_and_a_malformed_cluster(capsys):
    with pytest.raises(SystemExit, match="no stage 'sorting'.*bucketing, signing, deciding, tokenizing, scoring"):
        main(["--stage-cpu", "sorting=3"])
    with pytest.raises(SystemExit):
        main(["--hosts", "16by16"])
    assert "give hosts x cores, e.g. 16x16" in capsys.readouterr().err
