"""Which S3 settings a FileIO takes from the environment, and that no credential is part of its state."""

import pickle

from lakesweep.applier.doctor import _s3_settings
from lakesweep.engine.fileio import ArrowFileIO, fileio_for, profile_region, s3_properties_from_env

KEYS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalr-known-secret", "AWS_SESSION_TOKEN": "tok-1"}


def test_the_captured_settings_name_the_store_and_hold_no_credential():
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1", **KEYS}
    assert s3_properties_from_env(env) == {"endpoint": "http://127.0.0.1:9000", "region": "eu-west-1"}


def test_a_pickled_s3_fileio_carries_no_credential_from_the_environment(monkeypatch):
    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    io = fileio_for("s3://bucket/table")
    shipped = pickle.dumps(io)
    assert [v for v in KEYS.values() if v.encode() in shipped] == []
    assert pickle.loads(shipped) == io == ArrowFileIO("s3", s3_properties_from_env())


def test_the_region_comes_from_the_profile_in_the_config_file(tmp_path):
    config = tmp_path / "config"
    config.write_text("[default]\nregion = us-west-2\n\n[profile lake]\nregion = eu-central-1\n\n[profile none]\n")
    env = {"AWS_CONFIG_FILE": str(config)}
    assert profile_region(env) == "us-west-2"
    assert profile_region({**env, "AWS_PROFILE": "lake"}) == "eu-central-1"
    assert profile_region({**env, "AWS_PROFILE": "none"}) is None
    assert profile_region({**env, "AWS_PROFILE": "absent"}) is None
    assert profile_region({"AWS_CONFIG_FILE": str(tmp_path / "missing")}) is None
    assert s3_properties_from_env({**env, "AWS_PROFILE": "lake"}) == {"region": "eu-central-1"}
    assert s3_properties_from_env({**env, "AWS_PROFILE": "lake", "AWS_REGION": "ap-south-1"}) == {
        "region": "ap-south-1"}


def test_doctor_names_the_profile_and_its_region_never_a_key(tmp_path):
    config = tmp_path / "config"
    config.write_text("[profile lake]\nregion = eu-central-1\n")
    found, problem = _s3_settings({"AWS_PROFILE": "lake", "AWS_CONFIG_FILE": str(config)})
    assert problem is None
    assert found == [
        ("endpoint", "AWS's own for the region (AWS_ENDPOINT_URL is not set)"),
        ("region", f"eu-central-1 (from profile 'lake' in {config})"),
        ("credentials", f"profile 'lake' (from AWS_PROFILE), in ~/.aws/credentials or {config}"),
    ]
