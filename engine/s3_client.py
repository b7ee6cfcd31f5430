"""The one botocore S3 client factory, for the requests pyarrow.fs cannot send (DeleteObjects, PutObject with
``If-None-Match: *``). Settings come from ``engine.fileio.resolve_s3_settings``; a client is built where it is
used and never pickled, so no credential travels with a FileIO."""

from __future__ import annotations

from lakesweep.engine.fileio import S3Settings


def s3_client(settings: S3Settings, *, max_attempts: int):
    """A botocore S3 client for ``settings`` (credentials absent there come from botocore's chain: profiles,
    instance roles). ``max_attempts``: botocore's own attempts per request, 1 when the caller retries itself
    (bulk deletes count and pace every retry) and more where botocore's standard retries are wanted."""
    import botocore.config
    import botocore.session

    config = botocore.config.Config(
        retries={"total_max_attempts": max_attempts, "mode": "standard"},
        s3={"addressing_style": "path" if settings.path_style else "auto"},
        max_pool_connections=32, connect_timeout=10, read_timeout=60,
    )
    return botocore.session.get_session().create_client(
        "s3", region_name=settings.region, endpoint_url=settings.endpoint, config=config,
        aws_access_key_id=settings.access_key, aws_secret_access_key=settings.secret_key,
        aws_session_token=settings.session_token)
