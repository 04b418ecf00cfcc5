"""Every step's checks as the definitions declare them: blocking unless a warning, one result per dump;
and every publishing asset's `published_files` check, on demand, per partition."""

from fw_assets.contracts.asset_checks import PUBLISHED_FILES
from fw_assets_tests.support.contract_cases import DUMP


def test_blocking_checks_are_declared_on_every_stage_per_dump():
    from fw_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    specs = {
        (key.asset_key.to_user_string(), key.name): graph.get_check_spec(key)
        for key in graph.asset_check_keys
    }
    warnings_only = {("raw", "int_score"), ("raw", "text_sample")}
    assert {k for k in specs if k[0] in ("raw", "sampled", "bucketed")} >= warnings_only | {
        ("raw", "schema"), ("raw", "key_columns"),
        ("sampled", "schema"), ("sampled", "sampling_ratio"), ("sampled", "reconciliation"),
        ("bucketed", "schema"), ("bucketed", "score_in_bucket"), ("bucketed", "unique_ids"),
        ("bucketed", "reconciliation"),
    }
    for key, spec in specs.items():
        if key[0] in ("raw", "sampled", "bucketed") and key[1] != PUBLISHED_FILES:
            assert spec.blocking == (key not in warnings_only), key
            assert spec.partitions_def is not None and DUMP in spec.partitions_def.get_partition_keys()


def test_every_publishing_asset_has_a_published_files_check_per_partition():
    from fw_assets.definitions import PUBLISHING, defs

    graph = defs.resolve_asset_graph()
    checked = {key.asset_key: graph.get_check_spec(key)
               for key in graph.asset_check_keys if key.name == PUBLISHED_FILES}
    assert set(checked) == {asset.key for asset in PUBLISHING}
    for asset in PUBLISHING:
        assert not checked[asset.key].blocking
        assert checked[asset.key].partitions_def == asset.partitions_def
