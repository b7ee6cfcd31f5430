"""What a session on a cluster is started with: where the driver listens, whether the master answers, and
which AWS credential variables the executors are handed."""

import socket
import time

import pytest

from lakesweep.applier.spark_exec import (CREDENTIAL_ENV, LOOPBACK_DRIVER, check_master_reachable, forward_credentials,
                                          session_conf, standalone_masters)
from lakesweep.engine.errors import SparkUnavailable
from lakesweep.engine.plan_io import write_plan
from lakesweep.journal.duckdb_store import DuckDBRecorder
from tests.applier.test_preflight import lakesweep
from tests.planner.conftest import make_plan
from tests.support import pypaimon_tables as pt
from tests.support.table_builder import all_files


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


def test_only_local_masters_bind_the_driver_to_loopback():
    for master in ("local", "local[*]", "local[2]", "local[2,3]", "local-cluster[2,1,1024]"):
        conf = session_conf(master)
        assert {k: conf[k] for k in LOOPBACK_DRIVER} == LOOPBACK_DRIVER, master
    for master in ("spark://127.0.0.1:7077", "spark://head:7077,standby:7077", "yarn", "k8s://https://10.0.0.1:6443"):
        conf = session_conf(master)
        assert [k for k in LOOPBACK_DRIVER if k in conf] == [], master


def test_the_users_driver_address_wins_on_every_master():
    mine = {"spark.driver.host": "10.1.2.3", "spark.driver.bindAddress": "0.0.0.0"}
    for master in ("local[*]", "spark://head:7077", "yarn"):
        conf = session_conf(master, mine)
        assert {k: conf[k] for k in mine} == mine, master


def test_standalone_master_urls_are_split_into_hosts_and_ports():
    assert standalone_masters("spark://head:7077") == [("head", 7077)]
    assert standalone_masters("spark://a:7077,b:7078, c") == [("a", 7077), ("b", 7078), ("c", 7077)]
    assert standalone_masters("spark://[::1]:7079,[fe80::1]") == [("::1", 7079), ("fe80::1", 7077)]
    assert standalone_masters("yarn") == standalone_masters("local[*]") == []


def test_a_master_that_refuses_connections_is_reported_at_once():
    port = closed_port()
    started = time.monotonic()
    with pytest.raises(SparkUnavailable) as e:
        check_master_reachable(f"spark://127.0.0.1:{port}", consequence="nothing was deleted")
    assert time.monotonic() - started < 2
    assert str(e.value) == (f"Spark master spark://127.0.0.1:{port} cannot be reached (127.0.0.1:{port}: Connection "
                            "refused). Check --master and that the master is running; nothing was deleted.")


def test_a_master_that_does_not_answer_times_out_after_the_given_seconds():
    # A listening socket whose backlog is full: the kernel drops further SYNs, so connects hang.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        fillers = []
        try:
            for _ in range(8):  # fill the backlog (its size is rounded up by the kernel)
                c = socket.socket()
                c.setblocking(False)
                c.connect_ex(("127.0.0.1", port))
                fillers.append(c)
            time.sleep(0.2)
            started = time.monotonic()
            with pytest.raises(SparkUnavailable) as e:
                check_master_reachable(f"spark://127.0.0.1:{port}", timeout=0.5)
            assert 0.4 < time.monotonic() - started < 2
        finally:
            for c in fillers:
                c.close()
    assert str(e.value) == (f"Spark master spark://127.0.0.1:{port} cannot be reached (127.0.0.1:{port} did not "
                            "answer within 0.5 s). Check --master and that the master is running.")


def test_one_answering_master_of_a_high_availability_list_is_enough():
    down = closed_port()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        up = server.getsockname()[1]
        check_master_reachable(f"spark://127.0.0.1:{down},127.0.0.1:{up}")
    with pytest.raises(SparkUnavailable, match=f"127.0.0.1:{down}: Connection refused; 127.0.0.1:{up}: Connection"):
        check_master_reachable(f"spark://127.0.0.1:{down},127.0.0.1:{up}")


def test_other_masters_are_not_checked():
    for master in ("local[*]", "yarn", "k8s://https://192.0.2.1:6443"):
        check_master_reachable(master, timeout=0.01)


@pytest.mark.spark
def test_executors_on_this_machine_get_the_drivers_credential_variables_as_they_are_now(spark):
    sc = spark.sparkContext
    env = {"AWS_ACCESS_KEY_ID": "id-1", "AWS_SECRET_ACCESS_KEY": "secret-1", "AWS_PROFILE": "p1"}
    try:
        forward_credentials(sc, env)
        assert {k: sc.environment.get(k) for k in CREDENTIAL_ENV if k in sc.environment} == env
        seen = sc.parallelize([0], 1).map(lambda _: __import__("os").environ.get("AWS_SECRET_ACCESS_KEY")).collect()
        assert seen == ["secret-1"]
        forward_credentials(sc, {"AWS_PROFILE": "p2"})
        assert {k: sc.environment[k] for k in CREDENTIAL_ENV if k in sc.environment} == {"AWS_PROFILE": "p2"}
        assert "AWS_SECRET_ACCESS_KEY" not in sc.getConf().toDebugString()
    finally:
        forward_credentials(sc)


@pytest.mark.spark
def test_apply_with_an_unreachable_master_fails_in_seconds_naming_it(tmp_path):
    w = pt.write_demo_table(str(tmp_path / "wh"))
    plan = make_plan(w.path, retain_min=3)
    write_plan(plan, str(tmp_path / "plan.parquet"))
    before = all_files(w.path)
    master = f"spark://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    r = lakesweep("apply", tmp_path / "plan.parquet", "--journal", tmp_path / "j.duckdb", "--master", master,
                  cwd=tmp_path)
    took = time.monotonic() - started
    assert r.returncode == 1, r.stderr[-3000:]
    assert took < 15, took  # the interpreter and its imports; Spark alone took about 80 s to give up
    port = master.rsplit(":", 1)[1]
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: Spark master {master} cannot be reached (127.0.0.1:{port}: Connection refused). Check --master and "
        "that the master is running; nothing was deleted and no apply was started.")
    assert all_files(w.path) == before
    with DuckDBRecorder(str(tmp_path / "j.duckdb")) as rec:
        assert [e.EVENT_TYPE for e in rec.events(plan_id=plan.plan_id) if e.EVENT_TYPE.startswith("Apply")] == []
