"""resources.py: one Dagster instance belongs to one output folder. A run or a sensor tick on an
instance that holds the history of another folder is refused, naming both; its own folder runs."""

import dagster as dg

from fw_assets.automation.new_dumps import new_dumps
from fw_assets.bucketing.raw import raw
from fw_assets.definitions import defs
from fw_assets.resources import FineWebStorage
from fw_assets_tests.support.runs import SAMPLE_DUMPS, materialize_dump

DUMP = SAMPLE_DUMPS[0]


def refusal_of(first, second) -> tuple[str, ...]:
    return (f"keeps the history of the outputs in {first.resolve()}",
            f"this run or sensor writes to {second.resolve()}",
            "One instance belongs to one output folder", "another DAGSTER_HOME", "Nothing was run")


def test_a_run_on_another_output_folder_is_refused_naming_both(sample_source, tmp_path):
    first, second = tmp_path / "demo-output", tmp_path / "real-output"
    with dg.DagsterInstance.ephemeral() as instance:
        assert materialize_dump(sample_source, first, DUMP, [raw], instance=instance).success
        assert materialize_dump(sample_source, first, DUMP, [raw], instance=instance).success  # its own, again
        result = materialize_dump(sample_source, second, DUMP, [raw], instance=instance, raise_on_error=False)
    assert not result.success
    message = result.failure_data_for_node("raw").user_failure_data.description
    for expected in refusal_of(first, second):
        assert expected in message, message


def test_a_sensor_tick_on_another_output_folder_does_nothing_and_says_why(sample_source, tmp_path):
    first, second = tmp_path / "demo-output", tmp_path / "real-output"
    with dg.DagsterInstance.ephemeral() as instance:
        assert materialize_dump(sample_source, first, DUMP, [raw], instance=instance).success
        storage = FineWebStorage(source_dir=str(sample_source), output_dir=str(second))
        context = dg.build_sensor_context(instance=instance, definitions=defs, resources={"storage": storage})
        for sensor in (new_dumps,):
            result = sensor(context)
            assert not result.run_requests
            for expected in refusal_of(first, second):
                assert expected in result.skip_reason.skip_message
