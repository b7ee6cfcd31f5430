"""What a Paimon table's Avro metadata files (manifests, manifest lists, index manifests) say about themselves."""

from __future__ import annotations

from pathlib import Path

import fastavro

# Avro's name for each codec in a file header (``avro.codec``), by the name Paimon's options use
HEADER_CODEC = {"zstd": "zstandard", "snappy": "snappy", "deflate": "deflate", "null": "null"}
METADATA_KINDS = ("manifest-list", "index-manifest", "manifest")


def metadata_files(table_root: str | Path) -> dict[str, list[Path]]:
    """The files in ``manifest/`` by kind (Paimon names them ``<kind>-<uuid>-<n>``)."""
    out: dict[str, list[Path]] = {k: [] for k in METADATA_KINDS}
    for p in sorted((Path(table_root) / "manifest").iterdir()):
        kinds = [k for k in METADATA_KINDS if p.name.startswith(f"{k}-")]
        assert kinds, f"unexpected file in manifest/: {p.name}"
        out[kinds[0]].append(p)
    return out


def header_codec(path: str | Path) -> str:
    """The codec an Avro object container file declares (``null`` when it declares none)."""
    with open(path, "rb") as f:
        return fastavro.reader(f).metadata.get("avro.codec", "null")


def record_count(path: str | Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in fastavro.reader(f))


def metadata_codecs(table_root: str | Path) -> dict[str, str]:
    """``manifest/<file>`` -> the codec its header declares, for every metadata file of the table."""
    root = Path(table_root)
    return {str(p.relative_to(root)): header_codec(p) for files in metadata_files(root).values() for p in files}
