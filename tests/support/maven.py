"""Java references from Maven Central, fetched once with ``mvn`` and cached for the tests.

Every version the tests run against is pinned here, in ``JAVA_REFERENCES``. A jar is fetched with
``mvn dependency:copy`` into ``<cache>/maven/`` (the cache of ``paimon_java.cache_dir()``:
``~/.cache/lakesweep-tests``, or ``LAKESWEEP_TEST_CACHE``) the first time a test asks for it, so a fresh
machine fetches what it needs on its first run and later runs start from the cache.

Nothing here skips: a missing ``mvn`` or an artifact Maven cannot fetch raises ``RuntimeError`` with the fix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.paimon_java import cache_dir, publish


@dataclass(frozen=True, slots=True)
class Artifact:
    group: str
    artifact: str
    version: str

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def jar_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"


# The one place the Java references' versions are pinned.
JAVA_REFERENCES: dict[str, Artifact] = {
    # Iceberg's Spark runtime for the project's own pyspark (4.1): its actions and procedures are the reference
    "iceberg-spark": Artifact("org.apache.iceberg", "iceberg-spark-runtime-4.1_2.13", "1.12.0"),
    # lets Iceberg's JdbcCatalog open the SQLite catalog pyiceberg's SqlCatalog wrote
    "sqlite-jdbc": Artifact("org.xerial", "sqlite-jdbc", "3.46.1.3"),
    # current Apache Paimon's Java core with its formats
    "paimon-bundle": Artifact("org.apache.paimon", "paimon-bundle", "1.4.2"),
    # a real HDFS (MiniDFSCluster); it starts only with an SLF4J binding and JUnit 4 beside it
    "hadoop-minicluster": Artifact("org.apache.hadoop", "hadoop-client-minicluster", "3.4.1"),
    "slf4j-reload4j": Artifact("org.slf4j", "slf4j-reload4j", "1.7.36"),
    "junit": Artifact("junit", "junit", "4.13.2"),
}

# Class paths of several references with their transitive dependencies (``java_class_path``).
CLASS_PATHS: dict[str, tuple[str, ...]] = {
    "hdfs-minicluster": ("hadoop-minicluster", "slf4j-reload4j", "junit"),
}

MAVEN_HINT = (
    "The Java reference tests fetch their jars from Maven Central with 'mvn'. "
    "Install it with: apt-get install -y maven (macOS: brew install maven), then run the tests again"
)


def maven_dir(cache: Path | None = None) -> Path:
    path = (cache or cache_dir()) / "maven"
    path.mkdir(parents=True, exist_ok=True)
    return path


def mvn_executable() -> str:
    exe = shutil.which("mvn")
    if exe is None:
        raise RuntimeError(f"'mvn' was not found on PATH. {MAVEN_HINT}")
    return exe


def java_reference(name: str, *, cache: Path | None = None) -> Path:
    """The jar of ``JAVA_REFERENCES[name]``, fetched with ``mvn`` the first time and cached."""
    try:
        art = JAVA_REFERENCES[name]
    except KeyError:
        raise KeyError(f"no Java reference named {name!r}; known: {', '.join(sorted(JAVA_REFERENCES))}") from None
    target = maven_dir(cache) / art.jar_name
    if target.is_file() and target.stat().st_size > 0:
        return target
    mvn = mvn_executable()
    with tempfile.TemporaryDirectory(dir=target.parent, prefix="fetch-") as tmp:
        cmd = [mvn, "-B", "-q", "dependency:copy", f"-Dartifact={art.coordinates}", f"-DoutputDirectory={tmp}"]
        # run outside any Maven project, so that no pom.xml around changes what is fetched
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
        fetched = Path(tmp) / art.jar_name
        if proc.returncode != 0 or not fetched.is_file():
            raise RuntimeError(
                f"could not fetch {art.coordinates} from Maven Central (pinned in tests/support/maven.py):\n"
                f"$ {' '.join(cmd)}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
                "Check the network and Maven's settings (~/.m2/settings.xml), then run the tests again"
            )
        os.replace(fetched, target)
    return target


def _pom(arts: list[Artifact]) -> str:
    deps = "".join(f"<dependency><groupId>{a.group}</groupId><artifactId>{a.artifact}</artifactId>"
                   f"<version>{a.version}</version></dependency>" for a in arts)
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            "<groupId>lakesweep.tests</groupId><artifactId>class-path</artifactId><version>0</version>"
            f"<packaging>pom</packaging><dependencies>{deps}</dependencies></project>")


def java_class_path(name: str, *, cache: Path | None = None) -> str:
    """The class path (``:``-joined jars) of ``CLASS_PATHS[name]`` with their transitive dependencies: a pom
    of those references, its jars copied by ``mvn dependency:copy-dependencies`` into
    ``<cache>/maven/<name>-<versions>/`` the first time, and read from there after."""
    try:
        arts = [JAVA_REFERENCES[n] for n in CLASS_PATHS[name]]
    except KeyError:
        raise KeyError(f"no Java class path named {name!r}; known: {', '.join(sorted(CLASS_PATHS))}") from None
    target = maven_dir(cache) / f"{name}-{'-'.join(a.version for a in arts)}"
    done = target / ".complete"
    if not done.is_file():
        mvn = mvn_executable()
        with tempfile.TemporaryDirectory(dir=target.parent, prefix="fetch-") as tmp:
            (Path(tmp) / "pom.xml").write_text(_pom(arts))
            jars = Path(tmp) / "jars"
            cmd = [mvn, "-B", "-q", "dependency:copy-dependencies", f"-DoutputDirectory={jars}"]
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
            if proc.returncode != 0 or not any(jars.glob("*.jar")):
                raise RuntimeError(
                    f"could not fetch {', '.join(a.coordinates for a in arts)} with their dependencies from Maven "
                    f"Central (pinned in tests/support/maven.py):\n$ {' '.join(cmd)}\n{proc.stdout[-4000:]}\n"
                    f"{proc.stderr[-4000:]}Check the network and Maven's settings (~/.m2/settings.xml), then run "
                    "the tests again"
                )
            (jars / ".complete").write_text("")
            publish(jars, target)
    return os.pathsep.join(str(p) for p in sorted(target.glob("*.jar")))


def java_references(*names: str) -> list[Path]:
    """The jars of ``names``, in order (each fetched once)."""
    return [java_reference(n) for n in names]
