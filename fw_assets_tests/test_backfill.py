"""`python -m fw_assets.backfill`: which dumps `--all` takes, and what a user reads when it cannot
launch. The backfill it launches runs through the real webserver in e2e/test_services.py."""

import pytest

from fw_assets import backfill, settings
from fw_assets.synthetic import write_sample_dump

COMPLETE, PARTIAL = "CC-MAIN-2013-20", "CC-MAIN-2013-48"


@pytest.fixture
def source(tmp_path, monkeypatch):
    monkeypatch.setenv(settings.SOURCE_DIR_ENV, str(tmp_path))
    write_sample_dump(tmp_path, COMPLETE, rows=50, files=2)
    write_sample_dump(tmp_path, PARTIAL, rows=50, files=2)
    (tmp_path / "data" / PARTIAL / "train-00001-of-00002.parquet").unlink()  # still downloading
    return tmp_path


def test_all_takes_every_completely_downloaded_dump_and_names_the_others(source):
    ready, waiting = backfill.complete_dumps(source)
    assert ready == [COMPLETE]
    assert list(waiting) == [PARTIAL] and "train-00001-of-00002.parquet" in waiting[PARTIAL]


def test_without_a_webserver_it_says_where_it_looked_and_launches_nothing(source, capsys):
    assert backfill.main(["--all", "--url", "http://127.0.0.1:9"]) == 2
    out, err = capsys.readouterr()
    assert f"{PARTIAL}: left out" in out
    assert "no Dagster webserver answers at http://127.0.0.1:9" in err and "--url" in err


def test_dumps_or_all_but_not_both(source):
    with pytest.raises(SystemExit):
        backfill.main([COMPLETE, "--all"])
    with pytest.raises(SystemExit):
        backfill.main([])
