"""Corrupt metadata is an error naming the file: ids that disagree with file names, fields of the wrong
JSON type, non-ASCII digits, and metadata names that are paths instead of plain file names.

Every table here was written by pypaimon or by Paimon's Java core; the damage is done by hand afterwards.
"""

import io
import json
import os
import shutil

import fastavro
import pytest

from lakesweep.engine.errors import CorruptMetadata
from lakesweep.engine.paimon.table import PaimonTable, open_table


def _snapshot_path(table, sid):
    return os.path.join(table.path, "snapshot", f"snapshot-{sid}")


def _edit_json(path, **changes):
    with open(path) as f:
        obj = json.load(f)
    obj.update(changes)
    with open(path, "w") as f:
        json.dump(obj, f)


def _rewrite_avro(path, edit):
    """Rewrite an Avro file Paimon wrote, with its own writer schema, after ``edit(records)``."""
    with open(path, "rb") as f:
        reader = fastavro.reader(f)
        schema, codec = reader.writer_schema, reader.codec
        records = list(reader)
    edit(records)
    buf = io.BytesIO()
    fastavro.writer(buf, schema, records, codec=codec)
    with open(path, "wb") as f:
        f.write(buf.getvalue())


# -- snapshot ids ---------------------------------------------------------------------------------


def test_a_snapshot_whose_json_id_differs_from_its_file_name_names_the_file(append_table):
    path = _snapshot_path(append_table, 3)
    _edit_json(path, id=append_table.latest)
    with pytest.raises(CorruptMetadata) as e:
        PaimonTable(append_table.path).snapshot(3)
    assert str(e.value) == (f"{path}: the snapshot JSON holds id {append_table.latest}, but its file name says 3; "
                            "lakesweep will not guess which snapshot this is")


def test_try_snapshot_does_not_turn_a_mismatched_id_into_missing(append_table):
    _edit_json(_snapshot_path(append_table, 2), id=35)
    with pytest.raises(CorruptMetadata, match="holds id 35, but its file name says 2"):
        PaimonTable(append_table.path).try_snapshot(2)


def test_a_changelog_whose_json_id_differs_from_its_file_name_names_the_file(append_table):
    changelog_dir = os.path.join(append_table.path, "changelog")
    os.makedirs(changelog_dir)
    path = os.path.join(changelog_dir, "changelog-2")
    shutil.copy(_snapshot_path(append_table, 3), path)  # Paimon writes a changelog as the snapshot's JSON
    with pytest.raises(CorruptMetadata) as e:
        PaimonTable(append_table.path).changelog(2)
    assert str(e.value) == (f"{path}: the changelog JSON holds id 3, but its file name says 2; "
                            "lakesweep will not guess which changelog this is")
    shutil.copy(_snapshot_path(append_table, 2), path)
    assert PaimonTable(append_table.path).changelog(2).id == 2


def test_a_tag_carries_another_snapshots_json_and_is_not_held_to_its_file_name(append_table):
    tags = {t.name: t.snapshot.id for t in PaimonTable(append_table.path).tags()}
    assert tags == append_table.tags


def test_a_schema_whose_json_id_differs_from_its_file_name_names_the_file(append_table):
    path = os.path.join(append_table.path, "schema", "schema-0")
    _edit_json(path, id=1)
    with pytest.raises(CorruptMetadata) as e:
        open_table(append_table.path)
    assert str(e.value) == (f"{path}: the schema JSON holds id 1, but its file name says 0; "
                            "lakesweep will not guess which schema this is")


def test_planning_stops_on_a_mismatched_id_instead_of_deleting_the_latest_snapshot(append_table):
    from lakesweep.planner.paimon.expire import plan_expire
    from lakesweep.planner.paimon.options import resolve_expire_options

    path = _snapshot_path(append_table, 2)
    _edit_json(path, id=append_table.latest)
    t = open_table(append_table.path)
    opts = resolve_expire_options(t.options, retain_min=1, time_retained=0)
    with pytest.raises(CorruptMetadata, match=f"^{path}: the snapshot JSON holds id {append_table.latest}"):
        plan_expire(t, now_ms=10**15, options=opts)


# -- field types ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("id", True, "field 'id' must be an integer, not true"),
        ("id", 5.5, "field 'id' must be an integer, not 5.5"),
        ("id", "2", "field 'id' must be an integer, not \"2\""),
        ("id", 2**63, f"field 'id' is {2**63}, outside the range of a Java long"),
        ("timeMillis", "abc", "field 'timeMillis' must be an integer, not \"abc\""),
        ("schemaId", "x", "field 'schemaId' must be an integer, not \"x\""),
        ("commitIdentifier", 1.0, "field 'commitIdentifier' must be an integer, not 1.0"),
        ("totalRecordCount", False, "field 'totalRecordCount' must be an integer, not false"),
        ("version", 2**31, f"field 'version' is {2**31}, outside the range of a Java int"),
        ("baseManifestList", 123, "field 'baseManifestList' must be a string, not 123"),
        ("deltaManifestList", ["a"], "field 'deltaManifestList' must be a string, not [\"a\"]"),
        ("commitUser", {"a": 1}, "field 'commitUser' must be a string, not {\"a\": 1}"),
        ("commitKind", 0, "field 'commitKind' must be a string, not 0"),
        ("properties", {"k": 1}, "field 'properties' must map strings to strings, not {\"k\": 1}"),
        ("properties", [], "field 'properties' must map strings to strings, not []"),
        ("logOffsets", {"0": "x"}, "field 'logOffsets' must map integers to integers, not {\"0\": \"x\"}"),
    ],
)
def test_a_snapshot_field_of_the_wrong_type_names_the_file(append_table, field, value, message):
    path = _snapshot_path(append_table, 2)
    _edit_json(path, **{field: value})
    with pytest.raises(CorruptMetadata) as e:
        PaimonTable(append_table.path).snapshot(2)
    assert str(e.value) == f"{path}: malformed snapshot: {message}"


def test_a_tag_field_of_the_wrong_type_names_the_file(append_table):
    path = os.path.join(append_table.path, "tag", "tag-t_early")
    _edit_json(path, timeMillis="abc")
    with pytest.raises(CorruptMetadata) as e:
        PaimonTable(append_table.path).tags()
    assert str(e.value) == f"{path}: malformed tag: field 'timeMillis' must be an integer, not \"abc\""
    _edit_json(path, timeMillis=1, tagCreateTime="yesterday")
    with pytest.raises(CorruptMetadata) as e:
        PaimonTable(append_table.path).tags()
    assert str(e.value) == (f"{path}: malformed tag: field 'tagCreateTime' must be a list of integers, "
                            "not \"yesterday\"")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"id": True}, "field 'id' must be an integer, not true"),
        ({"highestFieldId": "3"}, "field 'highestFieldId' must be an integer, not \"3\""),
        ({"partitionKeys": "dt"}, "field 'partitionKeys' must be a list of strings, not \"dt\""),
        ({"primaryKeys": [1]}, "field 'primaryKeys' must be a list of strings, not [1]"),
        ({"options": {"bucket": 2}}, "field 'options' must map strings to strings, not {\"bucket\": 2}"),
        ({"fields": {}}, "field 'fields' must be a list of objects, not {}"),
        ({"comment": 7}, "field 'comment' must be a string, not 7"),
        ({"timeMillis": 1.5}, "field 'timeMillis' must be an integer, not 1.5"),
    ],
)
def test_a_schema_field_of_the_wrong_type_names_the_file(append_table, change, message):
    path = os.path.join(append_table.path, "schema", "schema-0")
    _edit_json(path, **change)
    with pytest.raises(CorruptMetadata) as e:
        open_table(append_table.path)
    assert str(e.value) == f"{path}: malformed schema: {message}"


def test_a_schema_field_entry_of_the_wrong_type_names_the_file(append_table):
    path = os.path.join(append_table.path, "schema", "schema-0")
    with open(path) as f:
        obj = json.load(f)
    obj["fields"][1]["name"] = 5
    with open(path, "w") as f:
        json.dump(obj, f)
    with pytest.raises(CorruptMetadata) as e:
        open_table(append_table.path)
    assert str(e.value) == f"{path}: malformed schema: field 'fields[1].name' must be a string, not 5"


@pytest.mark.parametrize("value", [True, 1.5, "3", 2**63])
def test_a_consumer_whose_next_snapshot_is_not_a_long_names_the_file(append_table, value):
    path = os.path.join(append_table.path, "consumer", "consumer-c1")
    with open(path, "w") as f:
        json.dump({"nextSnapshot": value}, f)
    with pytest.raises(CorruptMetadata) as e:
        PaimonTable(append_table.path).consumers()
    assert str(e.value).startswith(f"{path}: malformed consumer: field 'nextSnapshot' ")


# -- digits ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["snapshot-\u00b2", "snapshot-\uff11", "snapshot-\u0661", "snapshot-01",
                                  "snapshot-+1", "snapshot--1", "snapshot-99999999999999999999", "snapshot-"])
def test_snapshot_names_whose_rest_is_not_a_plain_ascii_id_are_ignored(append_table, name):
    # Java's Long.parseLong takes '１', '١', '01' and '+1' as 1, but the file it then reads for id 1 is
    # snapshot-1, never this one: a listing that counted this name would count a snapshot nobody reads.
    shutil.copy(_snapshot_path(append_table, 1), os.path.join(append_table.path, "snapshot", name))
    t = PaimonTable(append_table.path)
    assert t.list_snapshot_ids() == append_table.snapshots
    assert t.earliest_latest() == (1, append_table.latest)


@pytest.mark.parametrize("text", ["\uff11", "\u00b2", "\u0661", "1.0", "0x1", "99999999999999999999", ""])
def test_a_hint_that_is_not_an_ascii_long_is_refused(append_table, text):
    path = os.path.join(append_table.path, "snapshot", "EARLIEST")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    with pytest.raises(CorruptMetadata) as e:
        PaimonTable(append_table.path).earliest_latest()
    assert str(e.value) == f"{path}: hint file holds {text!r}, not a snapshot id"


def test_a_hint_with_ascii_digits_and_a_newline_is_read(append_table):
    with open(os.path.join(append_table.path, "snapshot", "EARLIEST"), "w") as f:
        f.write("2\n")
    assert PaimonTable(append_table.path).earliest_latest() == (2, append_table.latest)


# -- metadata names -------------------------------------------------------------------------------

BAD_NAMES = [
    ("../snapshot/snapshot-6", "it contains '/'"),
    ("a/b", "it contains '/'"),
    ("a\\b", "it contains '\\'"),
    (".", "it is '.'"),
    ("..", "it is '..'"),
    ("", "it is empty"),
    ("a\x00b", "it contains a NUL character"),
]


@pytest.mark.parametrize("field", ["statistics", "baseManifestList", "deltaManifestList", "changelogManifestList",
                                   "indexManifest"])
@pytest.mark.parametrize("name, reason", BAD_NAMES)
def test_a_snapshot_naming_a_path_instead_of_a_file_names_the_file(append_table, field, name, reason):
    path = _snapshot_path(append_table, 2)
    _edit_json(path, **{field: name})
    with pytest.raises(CorruptMetadata) as e:
        PaimonTable(append_table.path).snapshot(2)
    assert str(e.value) == f"{path}: malformed snapshot: field '{field}' is not a plain file name ({reason}): {name!r}"


def test_a_tag_naming_a_path_instead_of_a_file_names_the_file(append_table):
    path = os.path.join(append_table.path, "tag", "tag-t_late")
    _edit_json(path, statistics="../snapshot/snapshot-6")
    with pytest.raises(CorruptMetadata) as e:
        PaimonTable(append_table.path).tags()
    assert str(e.value) == (f"{path}: malformed tag: field 'statistics' is not a plain file name "
                            "(it contains '/'): '../snapshot/snapshot-6'")


def test_a_manifest_list_naming_a_path_names_the_file(append_table):
    t = PaimonTable(append_table.path)
    name = t.snapshot(2).delta_manifest_list
    path = os.path.join(append_table.path, "manifest", name)

    def edit(records):
        records[0]["_FILE_NAME"] = "../snapshot/snapshot-6"

    _rewrite_avro(path, edit)
    with pytest.raises(CorruptMetadata) as e:
        PaimonTable(append_table.path).manifest_list(name)
    assert str(e.value) == (f"{path}: malformed manifest list entry: '_FILE_NAME' is not a plain file name "
                            "(it contains '/'): '../snapshot/snapshot-6'")


@pytest.mark.parametrize("column, value, reason", [
    ("_FILE_NAME", "../../snapshot/snapshot-6", "it contains '/'"),
    ("_FILE_NAME", "..", "it is '..'"),
    ("_EXTRA_FILES", ["ok-file", "../x"], "it contains '/'"),
    ("_EXTRA_FILES", [""], "it is empty"),
])
def test_a_manifest_naming_a_path_instead_of_a_data_file_names_the_file(append_table, column, value, reason):
    t = PaimonTable(append_table.path)
    name = t.manifest_list(t.snapshot(2).delta_manifest_list)[0].file_name
    path = os.path.join(append_table.path, "manifest", name)

    def edit(records):
        records[0]["_FILE"][column] = value

    _rewrite_avro(path, edit)
    bad = value if isinstance(value, str) else value[-1]
    with pytest.raises(CorruptMetadata) as e:
        PaimonTable(append_table.path).manifest(name)
    assert str(e.value) == (f"{path}: malformed manifest entry: '{column}' is not a plain file name "
                            f"({reason}): {bad!r}")


@pytest.mark.java
def test_an_index_manifest_naming_a_path_names_the_file(paimon_java, tmp_path):
    table = tmp_path / "t"
    paimon_java.generate(table, seed=11, kind="pk", steps=8,
                         options={"deletion-vectors.enabled": "true", "changelog-producer": "none"},
                         ops={"write": 6, "delete": 3, "compact": 3, "overwrite": 0, "tag": 0, "untag": 0,
                              "consumer": 0})
    t = PaimonTable(str(table))
    _, latest = t.earliest_latest()
    index_manifest = t.snapshot(latest).index_manifest
    assert index_manifest, "the generated table has no index manifest"
    assert t.index_manifest(index_manifest), "the index manifest is empty"
    path = os.path.join(str(table), "manifest", index_manifest)

    def edit(records):
        records[0]["_FILE_NAME"] = "../manifest/" + index_manifest

    _rewrite_avro(path, edit)
    with pytest.raises(CorruptMetadata) as e:
        PaimonTable(str(table)).index_manifest(index_manifest)
    assert str(e.value) == (f"{path}: malformed index manifest entry: '_FILE_NAME' is not a plain file name "
                            f"(it contains '/'): '../manifest/{index_manifest}'")
