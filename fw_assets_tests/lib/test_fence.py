"""The fence of publications: a guard named by the step is asked before the renames, under the
publication's lock, and a guard that stops the publication leaves the previous generation published
whole, with nothing of the new one."""

import fcntl

import pytest

from fw_assets.lib.fence import guarded_by
from fw_assets.paths import publish_locks_dir
from fw_assets_tests.support.publish_generations import NAME, NEW, OLD, publish_generation
from fw_assets_tests.support.trees import published_tree


class Deposed(RuntimeError):
    pass


def test_a_guard_that_stops_a_publication_leaves_the_previous_generation_whole(tmp_path):
    publish_generation(tmp_path, "old", OLD)
    before = published_tree(tmp_path)
    asked = []

    def refuse(what: str) -> None:
        lock = publish_locks_dir(tmp_path) / f"{what.removeprefix('publishing ')}.lock"
        with open(lock) as other:  # the publication holds its lock while it asks
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
        asked.append(what)
        raise Deposed(f"run no longer live: {what}")

    with guarded_by(refuse), pytest.raises(Deposed, match=NAME):
        publish_generation(tmp_path, "new", NEW)
    assert asked == [f"publishing {NAME}"]
    assert published_tree(tmp_path) == before
    assert not list((tmp_path / ".staging").glob(f"{NAME}.*"))  # nothing of the new generation is left


def without_records(tree: dict) -> dict:
    return {path: digest for path, digest in tree.items() if not path.startswith("published/")}


def test_a_guard_that_lets_it_go_on_and_no_guard_at_all_publish_as_usual(tmp_path):
    guarded, unguarded, asked = tmp_path / "guarded", tmp_path / "unguarded", []
    with guarded_by(asked.append):
        publish_generation(guarded, "new", NEW)
    publish_generation(unguarded, "new", NEW)
    assert asked == [f"publishing {NAME}"]
    assert without_records(published_tree(guarded)) == without_records(published_tree(unguarded))
