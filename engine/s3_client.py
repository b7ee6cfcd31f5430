"""The one botocore S3 client factory, for the requests pyarrow.fs cannot send (DeleteObjects, PutObject with
``If-None-Match: *``). Settings come from ``engine.fileio.resolve_s3_settings``; a client is built where it is
used and never pickled, so no credential travels with a FileIO."""

from __future__ import annotations

import datetime
import os
import threading

from lakesweep.engine.fileio import S3Settings


def parse_timestamp(value):
    """botocore's timestamp parsing, without dateutil for S3's own form (``2026-11-26T08:49:30.000Z``):
    dateutil's parser took ~0.1 ms a key in ListObjectsV2 responses, more than the rest of their parsing.
    The same instant as botocore's, in UTC; any other form goes to botocore's parser."""
    from botocore.utils import parse_timestamp as botocore_parse

    if isinstance(value, str) and value.endswith("Z"):
        try:
            return datetime.datetime.fromisoformat(value[:-1]).replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            pass
    return botocore_parse(value)


_CLIENTS: dict = {}  # (process id, settings, max_attempts) -> client, for settings with explicit credentials
_CLIENTS_LOCK = threading.Lock()


def s3_client(settings: S3Settings, *, max_attempts: int):
    """A botocore S3 client for ``settings`` (credentials absent there come from botocore's chain: profiles,
    instance roles). ``max_attempts``: botocore's own attempts per request, 1 when the caller retries itself
    (bulk deletes count and pace every retry) and more where botocore's standard retries are wanted.

    Building a client takes 0.2-0.5 s (botocore loads S3's service model), so one for explicit credentials is
    built once per process and shared (botocore clients are thread-safe): a Spark worker running one task
    after another builds it once. A forked child builds its own: its parent's open connections are not its
    to use. Credentials from the chain are found anew for every client."""
    if settings.access_key is None:
        return _new_client(settings, max_attempts)
    key = (os.getpid(), settings, max_attempts)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = _new_client(settings, max_attempts)
        return client


def _new_client(settings: S3Settings, max_attempts: int):
    import botocore.config
    import botocore.session

    config = botocore.config.Config(
        retries={"total_max_attempts": max_attempts, "mode": "standard"},
        s3={"addressing_style": "path" if settings.path_style else "auto"},
        max_pool_connections=32, connect_timeout=10, read_timeout=60,
    )
    session = botocore.session.get_session()
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=parse_timestamp)
    return session.create_client(
        "s3", region_name=settings.region, endpoint_url=settings.endpoint, config=config,
        aws_access_key_id=settings.access_key, aws_secret_access_key=settings.secret_key,
        aws_session_token=settings.session_token)
