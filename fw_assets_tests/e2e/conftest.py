"""Every test in this folder is end-to-end (`e2e`): the folder is where process-level tests live,
and the fast loop (`pytest -m "not e2e"`) leaves all of them out."""

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "/e2e/" in str(item.path):
            item.add_marker(pytest.mark.e2e)
