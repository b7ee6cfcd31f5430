"""The Java reference kit: pinned artifacts fetched once with mvn, a missing mvn an error with the fix."""

from __future__ import annotations

import pytest

from tests.support import maven


def test_every_reference_is_pinned_to_one_exact_version():
    for name, art in maven.JAVA_REFERENCES.items():
        assert art.version[0].isdigit() and "SNAPSHOT" not in art.version and "," not in art.version, name


def test_a_missing_mvn_is_an_error_that_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError) as e:
        maven.java_reference("sqlite-jdbc", cache=tmp_path)
    assert str(e.value) == (
        "'mvn' was not found on PATH. The Java reference tests fetch their jars from Maven Central with 'mvn'. "
        "Install it with: apt-get install -y maven (macOS: brew install maven), then run the tests again"
    )


def test_an_unknown_reference_names_the_known_ones():
    with pytest.raises(KeyError, match="no Java reference named 'iceberg'; known: hadoop-minicluster, iceberg-spark, "
                                       "junit, paimon-bundle, slf4j-reload4j, sqlite-jdbc"):
        maven.java_reference("iceberg")


def test_a_reference_is_fetched_once_and_then_served_from_the_cache_without_mvn(monkeypatch, tmp_path):
    jar = maven.java_reference("sqlite-jdbc")
    assert jar.name == "sqlite-jdbc-3.46.1.3.jar" and jar.stat().st_size > 1_000_000
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn any more
    assert maven.java_reference("sqlite-jdbc") == jar


def test_a_class_path_holds_its_references_and_their_dependencies_and_is_then_served_without_mvn(monkeypatch,
                                                                                               tmp_path):
    jars = maven.java_class_path("hdfs-minicluster").split(":")
    names = {j.rsplit("/", 1)[-1] for j in jars}
    assert {"hadoop-client-minicluster-3.4.1.jar", "slf4j-reload4j-1.7.36.jar", "junit-4.13.2.jar",
            "hadoop-client-api-3.4.1.jar", "hadoop-client-runtime-3.4.1.jar", "hamcrest-core-1.3.jar"} <= names
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn any more
    assert maven.java_class_path("hdfs-minicluster").split(":") == jars


def _built(parent, name: str, content: str):
    d = parent / name
    d.mkdir()
    (d / "classes.jar").write_text(content)
    (d / ".complete").write_text("")
    return d


def test_a_cache_directory_published_first_stays_and_one_left_incomplete_is_replaced(tmp_path):
    """Test workers build the same cache directory side by side: the first complete copy stays (the other
    worker's JVM may be reading it), the later one is dropped; a copy without its marker is replaced."""
    from tests.support.paimon_java import publish

    out = tmp_path / "classes"
    publish(_built(tmp_path, "first", "first"), out)
    second = _built(tmp_path, "second", "second")
    publish(second, out)
    assert (out / "classes.jar").read_text() == "first" and not second.exists()
    (out / ".complete").unlink()
    publish(_built(tmp_path, "third", "third"), out)
    assert (out / "classes.jar").read_text() == "third" and (out / ".complete").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["classes"]
