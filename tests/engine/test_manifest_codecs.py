"""Every Avro codec Paimon can write its metadata with, on tables Paimon 0.9's Java core wrote.

Paimon writes manifests, manifest lists and index manifests with ``manifest.compression`` (zstd by
default); the harness makes it use each codec in turn. For each table: every metadata file really
carries that codec in its Avro header, lakesweep decodes every one of them, ``inspect`` reports no
problem, and expiry agrees file for file with Paimon's own (the differential suite's history runner).
"""

from __future__ import annotations

import pytest

from lakesweep.engine.paimon.inspect import inspect_table
from lakesweep.engine.paimon.table import open_table
from tests.differential.test_expire_vs_paimon import run_history
from tests.support.avro_metadata import HEADER_CODEC, metadata_codecs, metadata_files, record_count
from tests.support.paimon_java import MANIFEST_CODECS

pytestmark = pytest.mark.java

# (codec, seed): even seeds write primary-key tables, odd ones append tables; each seed deletes files
CASES = [("zstd", 6), ("snappy", 1), ("deflate", 4), ("null", 3)]


class _CodecHarness:
    """The session harness, writing every generated table with one manifest codec."""

    def __init__(self, harness, codec: str):
        self._harness = harness
        self._codec = codec
        self.generated: dict | None = None

    def generate(self, table, **kwargs):
        self.generated = self._harness.generate(table, manifest_compression=self._codec, **kwargs)
        return self.generated

    def __getattr__(self, name):
        return getattr(self._harness, name)


def test_every_supported_codec_has_a_case():
    assert sorted(c for c, _ in CASES) == sorted(MANIFEST_CODECS)


@pytest.mark.parametrize(("codec", "seed"), CASES, ids=[c for c, _ in CASES])
def test_table_with_codec_reads_and_expires_like_paimon(paimon_java, tmp_path, codec, seed):
    harness = _CodecHarness(paimon_java, codec)
    outcome = run_history(harness, tmp_path, seed)
    assert outcome["deleted"] > 0, f"seed {seed} deletes nothing: pick one whose expiry does"

    base = tmp_path / "base"  # run_history's untouched original
    files = metadata_files(base)
    assert files["manifest-list"] and files["manifest"]
    headers = metadata_codecs(base)
    assert set(headers.values()) == {HEADER_CODEC[codec]}, headers

    table = open_table(str(base))
    read = {"manifest-list": table.manifest_list, "manifest": table.manifest, "index-manifest": table.index_manifest}
    decoded = 0
    for kind, paths in files.items():
        for p in paths:
            n = len(read[kind](p.name))
            assert n == record_count(p), p
            decoded += n
    assert decoded > 0

    report = inspect_table(table)
    generated = harness.generated
    assert report["problems"] == []
    assert [s["id"] for s in report["snapshots"]] == [s["id"] for s in generated["snapshots"]]
    assert {t["name"]: t["snapshot_id"] for t in report["tags"]} == generated["tags"]
    assert report["schema"]["options"]["manifest.compression"] == codec
    assert report["latest_live"]["files"] > 0
