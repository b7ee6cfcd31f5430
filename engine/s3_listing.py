"""Listing an S3 prefix with ListObjectsV2, a page (at most 1,000 keys) at a time, through botocore.

pyarrow's ``get_file_info(FileSelector)`` returns a whole listing at once, so a prefix of a million keys is a
million objects in one list; the paginator here hands each page on as it arrives. With ``recursive`` one
flat listing (no delimiter) covers every key below the prefix; otherwise the delimiter ``/`` gives the
direct children, sub-directories as their common prefixes. A key ending in ``/`` is a folder marker, never
a file. The client is built where the listing runs, its credentials from the AWS SDK's chain: nothing
secret is part of what is pickled.
"""

from __future__ import annotations

import datetime
from typing import Iterator

from lakesweep.engine.errors import StorageError
from lakesweep.engine.fileio import FileInfo

PAGE_KEYS = 1000  # ListObjectsV2's own maximum
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MS = datetime.timedelta(milliseconds=1)


def list_pages(client, location: str, *, recursive: bool = False,
               page_keys: int = PAGE_KEYS) -> Iterator[list[FileInfo]]:
    """The entries below ``location`` (``s3://bucket/key``), a response page at a time, each page sorted by
    path: the files, and for a listing that is not ``recursive`` the sub-directories (``is_dir``). Raises
    ``StorageError`` naming ``location`` when a page cannot be read; a prefix with no key has no page
    entries."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, _, key = location[len("s3://"):].partition("/")
    prefix = key.rstrip("/") + "/" if key else ""
    args = {"Bucket": bucket, "Prefix": prefix, "PaginationConfig": {"PageSize": page_keys}}
    if not recursive:
        args["Delimiter"] = "/"
    base = f"s3://{bucket}/"
    try:
        for page in client.get_paginator("list_objects_v2").paginate(**args):
            out = [FileInfo(base + c["Prefix"].rstrip("/"), 0, None, True) for c in page.get("CommonPrefixes", ())]
            for obj in page.get("Contents", ()):
                k = obj["Key"]
                if k.endswith("/"):
                    continue  # a folder marker (the prefix's own, or one below it): not a file
                out.append(FileInfo(base + k, int(obj["Size"]), (obj["LastModified"] - _EPOCH) // _MS))
            out.sort(key=lambda f: f.path)
            yield out
    except (BotoCoreError, ClientError) as e:
        raise StorageError(location, f"cannot list: {e}") from e
