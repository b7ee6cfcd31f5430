"""Manifests are handed to Spark tasks in order, in groups of about a size that gives each core a few."""

from lakesweep.applier.spark_tasks import error_of, error_text, task_groups, task_size
from lakesweep.engine.errors import CorruptMetadata, MetadataNotFound


def test_items_are_grouped_in_order_into_groups_of_about_the_size_asked():
    manifests = [("a", 5), ("b", 4), ("c", 3), ("d", 20), ("e", 0)]
    assert task_groups(manifests, size=10) == [["a", "b"], ["c"], ["d"], ["e"]]
    assert task_groups([], size=10) == []


def test_a_task_takes_on_its_share_of_two_per_core_or_the_least_asked():
    assert task_size(1000, 2, at_least=10) == 250
    assert task_size(1001, 2, at_least=1) == 251
    assert task_size(1000, 2, at_least=400) == 400


def test_a_metadata_error_crosses_from_an_executor_as_the_same_error():
    for error in (MetadataNotFound("/t/manifest/m-1", "manifest"), CorruptMetadata("/t/manifest/m-2", "bad: avro")):
        again = error_of(error.path, error_text(error))
        assert (type(again), again.path, str(again)) == (type(error), error.path, str(error))
