"""When a dump's decisions and token files are made (fw_assets.crawl_order): the automation of group
`fineweb_edu_kept` evaluated tick by tick against what the instance records of signing runs, queued
runs and open backfills, as the `decide_in_crawl_order` sensor evaluates it in the daemon."""

import random

import dagster as dg
import pytest

from fw_assets.partitions import dump_partitions
from fw_assets_tests.support.automation import (
    CrawlOrderTicks,
    decided,
    decisions_made,
    end_backfill,
    open_signing_backfill,
    queued_signing_run,
    signed,
)

DUMPS = dump_partitions.get_partition_keys()[:6]  # in crawl order
FIRST, SECOND, THIRD = DUMPS[:3]


@pytest.fixture
def automation(instance) -> CrawlOrderTicks:
    automation = CrawlOrderTicks(instance)
    assert automation.tick() == {}  # nothing signed, nothing to decide
    return automation


def test_a_dump_is_decided_once_when_signed_and_never_a_dump_never_signed(instance, automation):
    signed(instance, SECOND)
    assert automation.tick() == decided(SECOND)
    for _ in range(3):  # requested once, not once per tick, also before its run is queued
        assert automation.tick() == {}
    decisions_made(instance, SECOND)
    assert automation.tick() == {}


def test_a_dump_waits_while_an_earlier_dumps_signing_run_is_queued(instance, automation):
    run = queued_signing_run(instance, FIRST)
    signed(instance, THIRD)
    assert automation.tick() == {}
    signed(instance, FIRST)
    instance.report_run_canceled(run)  # its run ended (the signing above is its outcome)
    assert automation.tick() == decided(FIRST, THIRD)


def test_a_dump_waits_while_its_own_signing_run_is_queued(instance, automation):
    signed(instance, SECOND)
    queued_signing_run(instance, SECOND)  # signed again: a new download
    assert automation.tick() == {}


def test_a_backfill_signs_every_dump_it_holds_before_it_decides_any(instance, automation):
    backfill = open_signing_backfill(instance, [FIRST, THIRD])
    signed(instance, THIRD)  # its run finished first
    assert automation.tick() == {}
    signed(instance, SECOND)  # not in the backfill: nothing earlier is in flight for it ... but FIRST is
    assert automation.tick() == {}
    signed(instance, FIRST)
    end_backfill(instance, backfill)
    assert automation.tick() == decided(FIRST, SECOND, THIRD)


def test_a_late_earlier_dump_re_decides_each_later_dump_once(instance, automation):
    for dump in (SECOND, THIRD):
        signed(instance, dump)
    assert automation.tick() == decided(SECOND, THIRD)
    for dump in (SECOND, THIRD):
        decisions_made(instance, dump)
    assert automation.tick() == {}
    signed(instance, FIRST)  # downloaded late
    assert automation.tick() == decided(FIRST, SECOND, THIRD)
    for dump in (FIRST, SECOND, THIRD):
        decisions_made(instance, dump)
    assert automation.tick() == {}
    assert automation.tick() == {}


def test_an_identical_re_sign_re_decides_nothing_and_other_band_keys_re_decide_the_later_dumps(
    instance, automation
):
    for dump in (FIRST, SECOND):
        signed(instance, dump)
    automation.tick()
    for dump in (FIRST, SECOND):
        decisions_made(instance, dump)
    assert automation.tick() == {}
    signed(instance, FIRST)  # a retry, a backfill of dumps already signed: the same content version
    assert automation.tick() == {}
    signed(instance, FIRST, content_version="v2")
    assert automation.tick() == decided(FIRST, SECOND)


def test_dumps_signed_in_any_order_side_by_side_are_each_decided_once_after_the_last(instance, automation):
    order = DUMPS[:]
    random.Random(7).shuffle(order)
    runs = {dump: queued_signing_run(instance, dump) for dump in order}
    requested: list[tuple[str, str]] = []
    for dump in order:  # each signing run ends; its decisions wait for every earlier one
        signed(instance, dump)
        instance.report_run_canceled(runs[dump])
        for name, dumps in automation.tick().items():
            requested += [(name, d) for d in dumps]
            if name == "deduplicated":
                for d in dumps:
                    decisions_made(instance, d)
        assert automation.tick() == {}
    assert sorted(requested) == sorted((name, d) for d in DUMPS for name in ("deduplicated", "tokenized"))


def test_a_failed_decision_is_not_retried_until_an_input_is_made_again(instance, automation):
    signed(instance, FIRST)
    signed(instance, SECOND)
    automation.tick()
    decisions_made(instance, FIRST)
    run = queued_signing_run(instance, SECOND)  # stands for the deciding run that fails
    instance.report_run_failed(run)
    assert automation.tick() == {}


def test_an_earlier_dump_signed_while_later_decisions_were_made_re_decides_them_once(instance, automation):
    for dump in (SECOND, THIRD):
        signed(instance, dump)
    assert automation.tick() == decided(SECOND, THIRD)
    signed(instance, FIRST)  # downloaded late: its signing ends between the same two ticks as ...
    for dump in (SECOND, THIRD):
        decisions_made(instance, dump)  # ... the decision runs that read the band keys without it
    assert automation.tick() == decided(FIRST, SECOND, THIRD)
    for dump in (FIRST, SECOND, THIRD):
        decisions_made(instance, dump)
    assert automation.tick() == {}


def test_token_files_follow_decisions_requested_in_the_tick_their_last_ones_were_published(instance, automation):
    signed(instance, SECOND)
    assert automation.tick() == decided(SECOND)
    instance.report_runless_asset_event(dg.AssetMaterialization("deduplicated", partition=SECOND))
    assert automation.tick() == {}  # its run goes on to tokenize
    instance.report_runless_asset_event(dg.AssetMaterialization("tokenized", partition=SECOND))
    signed(instance, FIRST)  # between the same two ticks
    assert automation.tick() == decided(FIRST, SECOND)
    assert automation.tick() == {}


def test_dumps_signed_before_the_automation_first_evaluates_are_decided_then(instance):
    for dump in (SECOND, THIRD):  # an instance from before the automation's sensor first ticked
        signed(instance, dump)
    automation = CrawlOrderTicks(instance)
    assert automation.tick() == decided(SECOND, THIRD)
    assert automation.tick() == {}
