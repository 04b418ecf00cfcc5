"""When a dump's decisions and token files are made: Dagster's declarative automation, evaluated
by the `decide_in_crawl_order` sensor (fw_assets.automation.decide_in_crawl_order).

A dump's run of group `fineweb_edu` signs it (raw to band_key_index): dumps sign side by side, in
any order, on any host. `deduplicated` and `tokenized` (group `fineweb_edu_kept`) decide and
tokenize it once no signing they read is queued or under way: `deduplicated` of a dump reads the
band keys of every earlier dump (fw_assets.dedup.band_key_lineage.later_dumps), so Dagster holds a
dump's decisions back while an earlier dump's signing run is queued, running, or still to be
launched by an open backfill, and decides it once after the last of them. Each condition is true
once per change, until handled (`_until_handled`): a late earlier dump re-decides each later dump
once, not once per tick, also when it changes between the same two ticks as their last run ended.
Changes are data versions, so an identical re-sign (a retry, a backfill of dumps already signed)
requests nothing.
"""

import dagster as dg

A = dg.AutomationCondition

# The dump's own output was never made and its last attempt did not fail: true on the tick that
# becomes so (or on the first evaluation), not on every tick while it stays so, or a request whose
# run is not yet queued when the next tick comes would be asked for again (a failed attempt is not
# retried tick after tick either: its inputs changing, or a person, asks again).
NEVER_MADE = (A.missing() & ~A.execution_failed()).newly_true().with_label("never made, and not failed")


def _until_handled(trigger: dg.AutomationCondition) -> dg.AutomationCondition:
    """True from a tick `trigger` is true until the asset is requested or updated, as Dagster's
    `since_last_handled`, except that a trigger wins a tie: Dagster lets the reset win when both come
    between the same two ticks unless both carry timestamps, which `data_version_changed`,
    `will_be_requested` and any `|` do not. A later dump's decisions published just as an earlier
    dump's band keys change (its run read them before) would never be made again."""
    handled = (A.newly_requested() | A.newly_updated() | A.initial_evaluation()).with_label("handled")
    return trigger.since(~trigger & handled)


def _held(needs: dg.AssetSelection) -> dg.AutomationCondition:
    """Not while a dependency in `needs` is missing, nor while any dependency's run is queued or in
    progress (or a backfill is still to run it), nor while the asset's own is."""
    return (
        ~A.any_deps_match(A.missing() & ~A.will_be_requested()).allow(needs).with_label("an input is missing")
        & ~A.any_deps_in_progress().with_label("an input's run is queued or in progress")
        & ~A.in_progress()
    )


def decided_when_signed(own: dg.AssetSelection, earlier: dg.AssetSelection | None) -> dg.AutomationCondition:
    """A dump's decisions: requested once after its own band keys (`own`, the dump's) or an earlier
    dump's (`earlier`) get a new data version, when never made, or when the last attempt failed and
    one of them was made again since (a repaired file has its old data version); held while its own
    are missing and while any signing they read is queued or in progress.

    Its own band keys updated by a run that also decided it (the CLI's whole chain) are not a change
    to decide it for; Dagster tells that by the asset's latest run, so while another dump's run
    updates them meanwhile it may ask once more, which the step then finds unchanged. An earlier
    dump's change always counts: its run may have decided that dump, never this one."""
    changed = A.any_deps_match(A.data_version_changed() & ~A.executed_with_root_target()).allow(own)
    remade = A.any_deps_match(A.newly_updated() & ~A.executed_with_root_target()).allow(own)
    if earlier:
        changed |= A.any_deps_match(A.data_version_changed()).allow(earlier)
        remade |= A.any_deps_match(A.newly_updated()).allow(earlier)
    retried = (A.execution_failed() & remade).with_label("failed, and an input was made again since")
    return _until_handled(changed.with_label("an input has a new data version") | NEVER_MADE | retried) & _held(own)


def made_with(decisions: dg.AssetSelection, needs: dg.AssetSelection) -> dg.AutomationCondition:
    """What follows a dump's decisions in the same run (its token files): requested in the tick its
    decisions are, when never made, or when its last attempt failed and the decisions were made
    again since; held as `_held` says. Never on the decisions' data version alone: Dagster tells a
    change made by a run that also ran this asset only by the asset's latest run, so with another
    dump's decisions published meanwhile it would ask a second time for the same ones."""
    with_them = A.any_deps_match(A.will_be_requested()).allow(decisions).with_label("its decisions are requested")
    retried = (A.execution_failed() & A.any_deps_match(A.newly_updated()).allow(decisions)).with_label(
        "failed, and its decisions were made again since"
    )
    return _until_handled(with_them | NEVER_MADE | retried) & _held(needs)
