"""The order the test modules start in (a pytest plugin the top conftest loads): the modules that
take minutes first, so that with pytest-xdist (`--dist loadfile`: a module runs whole on one
worker) the suite does not end with one worker still on a long module while the others idle. Only
the order changes; a module not listed keeps its place after them."""

import pytest

# The longest modules of a full run (pytest --junitxml, summed per module), longest first.
LONGEST_FIRST = (
    "e2e/test_arrival_orders.py",
    "e2e/test_services.py",
    "e2e/test_postgres.py",
    "e2e/test_more_than_one_machine_safety.py",
    "e2e/test_more_than_one_machine.py",
    "e2e/test_bench.py",
    "e2e/test_source_deletion.py",
    "dedup/test_deduplicated.py",
    "e2e/test_bench_hosts.py",
    "tokenizing/test_tokenized.py",
    "test_run_health.py",
    "mixtures/test_loss_inputs.py",
    "probe/test_causal_lm.py",
    "probe/test_probe_loss.py",
)


def start_rank(item: pytest.Item) -> int:
    path = item.path.as_posix()
    return next((rank for rank, module in enumerate(LONGEST_FIRST) if path.endswith("/" + module)),
                len(LONGEST_FIRST))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=start_rank)  # stable: the tests of a module keep their order
