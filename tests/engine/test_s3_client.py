"""The botocore S3 client factory: S3's timestamps parsed as botocore parses them, one client per process
for the same explicit settings."""

import datetime

import pytest
from botocore.utils import parse_timestamp as botocore_parse

from lakesweep.engine.fileio import resolve_s3_settings
from lakesweep.engine.s3_client import parse_timestamp, s3_client

PROPS = {"endpoint": "http://127.0.0.1:9", "region": "us-east-1", "access_key": "AKIDEXAMPLE", "secret_key": "s"}


@pytest.mark.parametrize("value", ["2026-11-26T08:49:30.000Z", "2026-11-26T08:49:30Z", "2026-11-26T08:49:30.123456Z",
                                   "2026-11-26T08:49:30.123456789Z", "Thu, 26 Nov 2026 08:49:30 GMT", "1795596570"])
def test_timestamps_parse_to_the_value_botocore_gives(value):
    assert parse_timestamp(value) == botocore_parse(value)


def test_an_s3_listing_timestamp_is_that_instant_in_utc():
    assert parse_timestamp("2026-11-26T08:49:30.250Z") == datetime.datetime(
        2026, 11, 26, 8, 49, 30, 250000, tzinfo=datetime.timezone.utc)


def test_a_client_for_explicit_credentials_is_built_once_per_process():
    settings = resolve_s3_settings(PROPS, env={})
    other_key = resolve_s3_settings({**PROPS, "secret_key": "t"}, env={})
    client = s3_client(settings, max_attempts=1)
    assert s3_client(resolve_s3_settings(dict(PROPS), env={}), max_attempts=1) is client
    assert s3_client(settings, max_attempts=4) is not client
    assert s3_client(other_key, max_attempts=1) is not client


def test_a_client_with_credentials_from_the_chain_is_built_anew():
    settings = resolve_s3_settings({"endpoint": "http://127.0.0.1:9", "region": "us-east-1"}, env={})
    assert settings.access_key is None
    assert s3_client(settings, max_attempts=1) is not s3_client(settings, max_attempts=1)


def test_a_forked_child_builds_its_own_client():
    import multiprocessing

    settings = resolve_s3_settings(PROPS, env={})
    parent = id(s3_client(settings, max_attempts=1))
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child = pool.apply(_client_id, (settings,))
    assert child != parent and id(s3_client(settings, max_attempts=1)) == parent


def _client_id(settings):
    return id(s3_client(settings, max_attempts=1))
