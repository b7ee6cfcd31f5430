"""Manifests are handed to Spark tasks in order, in groups of about a size that gives each core a few."""

from lakesweep.applier.spark_tasks import task_groups, task_size


def test_items_are_grouped_in_order_into_groups_of_about_the_size_asked():
    manifests = [("a", 5), ("b", 4), ("c", 3), ("d", 20), ("e", 0)]
    assert task_groups(manifests, size=10) == [["a", "b"], ["c"], ["d"], ["e"]]
    assert task_groups([], size=10) == []


def test_a_task_takes_on_its_share_of_two_per_core_or_the_least_asked():
    assert task_size(1000, 2, at_least=10) == 250
    assert task_size(1001, 2, at_least=1) == 251
    assert task_size(1000, 2, at_least=400) == 400
