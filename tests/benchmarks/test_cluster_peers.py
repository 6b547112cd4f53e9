"""The cluster benchmark's systems start three nodes, take puts that every node then holds, and stop without
leaving a process or a directory behind; the command's table and summary (a tiny run with aeron-numba's cluster
beside PySyncObj, end to end), and its one-line refusals. No timing is asserted (the machine is shared): only that
operations round-trip and that the figures are well-formed."""

from __future__ import annotations

import json

import pytest

from harness.awaiting import await_condition

from benchmarks.cluster import bench
from benchmarks.cluster import load as L
from benchmarks.cluster.etcd_system import EtcdSystem, grpc_available
from benchmarks.cluster.pysyncobj_system import PySyncObjSystem

VALUE = L.keys_and_value(1, L.VALUE_SIZE)[1]


def _round_trip(system, tmp_path, read):
    """Start, put, read the value back from every node, a short open loop, stop: all processes gone."""
    system.start(tmp_path / system.name, timeout_s=60)
    try:
        leader = system.leader()
        assert leader in (0, 1, 2)
        result = system.run_load(L.LoadSpec(rate=None, count=5, warmup=1, max_seconds=30))
        assert result.count == 5 and result.ok.all() and (result.done_ns >= result.sent_ns).all()
        for index in range(3):  # k0..k4 were put; every member applies the log
            await_condition(lambda: read(index, "k4") == VALUE, 30, f"{system.name} node {index} holding k4")
        result = system.run_load(L.LoadSpec(rate=200.0, count=20))
        assert result.ok.all() and (result.latency_ns() > 0).all()
        assert L.judge_sustained(result, 10**10).acknowledged == 20
        processes = list(system.processes.processes)
        assert all(p.is_alive for p in processes)
    finally:
        system.stop()
    assert not any(p.is_alive for p in processes)


@pytest.mark.parametrize("batch", [False, True], ids=["unbatched", "batched"])
def test_pysyncobj_nodes_round_trip_and_stop(tmp_path, batch):
    system = PySyncObjSystem(batch=batch)
    assert system.unavailable() is None  # pysyncobj is in the bench extra
    _round_trip(system, tmp_path, system.get)
    assert system.describe()["batching"] is batch


def _etcd_or_skip():
    reason = EtcdSystem.unavailable()
    if reason:
        pytest.skip(reason)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_etcd_members_round_trip_and_stop(tmp_path, protocol):
    _etcd_or_skip()
    if protocol == "grpc" and not grpc_available():
        pytest.skip("grpcio is not installed")
    system = EtcdSystem(protocol=protocol)
    _round_trip(system, tmp_path, system.get)
    assert not system.data_root.exists()  # its /dev/shm data went with it


@pytest.mark.slow
def test_pysyncobj_failover_is_measured(tmp_path):
    system = PySyncObjSystem()
    system.start(tmp_path, timeout_s=60)
    try:
        old = system.leader()
        result = system.run_failover(L.FailoverSpec(rate=200, kill_target=system.leader_kill_target(), kill_after_s=0.3,
                                                    timeout_s=30))
        figures = L.failover_figures(result)
        assert figures["failover_ns"] is not None and figures["failover_ns"] > 0
        assert not system.nodes[old].is_alive
        await_condition(lambda: system.leader() not in (None, old), 30, "a new leader")
    finally:
        system.stop()


def test_the_command_runs_pysyncobj_and_prints_the_table(tmp_path, capsys):
    out = tmp_path / "out"
    assert bench.main(["--tiny", "--only", "pysyncobj", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for heading in ("Synchronous put", "Open loop at a fixed rate", "Highest sustained rate", "Failover",
                    "Ratios (same run", "Targets"):
        assert heading in text, text
    summary = json.loads((out / bench.SUMMARY_FILE).read_text())
    cases = summary["systems"]["pysyncobj"]["cases"]
    assert set(cases) == {"sync", "fixed.1k", "fixed.10k", "sustained", "failover"}
    assert all(c["ok"] for c in cases.values()), cases
    assert cases["sync"]["figures_ns"]["p50"] > 0 and cases["failover"]["figures"]["failover_s"] > 0
    assert [t["rate"] for t in cases["sustained"]["trials"]][:1] == [500]
    histograms = json.loads((out / bench.HISTOGRAMS_FILE).read_text())["histograms"]
    assert {"cluster.pysyncobj.sync", "cluster.pysyncobj.fixed.1k"} <= set(histograms)
    assert summary["ratios"]["sustained rate aeron / pysyncobj"]["value"] is None  # aeron not in this run
    assert (out / "logs" / "pysyncobj").is_dir()


@pytest.mark.slow
def test_the_command_runs_aeron_beside_a_peer_end_to_end(tmp_path, capsys):
    out = tmp_path / "out"
    code = bench.main(["--tiny", "--only", "aeron", "pysyncobj", "--out", str(out)])
    text = capsys.readouterr().out
    summary = json.loads((out / bench.SUMMARY_FILE).read_text())
    aeron = summary["systems"]["aeron"]
    assert set(aeron["cases"]) == {"sync", "idle", "fixed.1k", "fixed.10k", "sustained", "failover"}
    assert aeron["cases"]["sync"]["cpu_per_put_ns"] > 0 and aeron["cases"]["idle"]["figures"]["cores"] > 0
    measured = {name: c.get("error") for name, c in aeron["cases"].items() if name != "failover" and not c["ok"]}
    assert measured == {}, text
    # The failover case ran: a figure, or (exit 1) the reason with every node's state; the figure itself is the
    # next test's.
    failover = aeron["cases"]["failover"]
    assert (failover["ok"] and failover["figures"]["failover_s"] > 0 and code == 0) or (
        not failover["ok"] and "nodes: member" in failover["error"] and code == 1), failover
    assert aeron["describe"]["service"] == "KeyValueService"
    ratios = summary["ratios"]
    assert ratios["p99 at 1k/s aeron / pysyncobj sync p99"]["value"] > 0
    assert summary["targets"]["aeron p50 at 1k/s"]["value"] > 0
    assert "aeron-numba cluster benchmark (tiny)" in text and "aeron      " in text
    assert (out / "logs" / "aeron").is_dir()


@pytest.mark.slow
def test_aeron_failover_is_measured(tmp_path):
    """aeron-numba's cluster elects a new leader after its leader is SIGKILLed and answers a put sent after the kill
    (the golden run's timeouts: leader heartbeat timeout 2 s, election timeout 1 s)."""
    from benchmarks.cluster.aeron_system import AeronClusterSystem

    system = AeronClusterSystem()
    system.start(tmp_path, timeout_s=300)
    try:
        system.run_load(L.LoadSpec(rate=500, count=500))
        system.await_replicated(60)  # as the benchmark starts a failover: every member has what the leader committed
        commits = {node.member_id: node.commit_position() for node in system.harness.nodes}
        assert len(set(commits.values())) == 1 and None not in commits.values(), commits
        old = system.leader()
        result = system.run_failover(L.FailoverSpec(rate=200, kill_target=system.leader_kill_target(),
                                                    kill_after_s=0.5, timeout_s=30))
        figures = L.failover_figures(result)
        assert figures["failover_ns"] is not None, f"{figures}; nodes: {system.status_text()}"
        assert 0 < figures["new_leader_event_ns"] <= figures["failover_ns"], figures  # the client followed the leader
        assert system.leader() not in (None, old)
    finally:
        system.stop()


def _case(**figures):
    if "msgs_per_s" in figures:
        return {"ok": True, "figures": figures}
    return {"ok": True, "figures_ns": figures}


def test_ratios_compare_aeron_with_the_peers_of_the_run():
    systems = {
        "aeron": {"peer": False, "cases": {"fixed.1k": _case(p50=200_000, p99=600_000),
                                           "sustained": _case(msgs_per_s=60_000)}},
        "pysyncobj": {"peer": True, "cases": {"sync": _case(p50=500_000, p99=1_000_000),
                                              "sustained": _case(msgs_per_s=5_000)}},
        "etcd": {"peer": True, "cases": {"sync": _case(p50=1_000_000, p99=2_000_000),
                                         "sustained": _case(msgs_per_s=16_000)}},
        "gone": {"peer": True, "skipped": "not installed"},
    }
    ratios = bench.compute_ratios(systems)
    best = ratios["sustained rate aeron / best peer"]
    assert best["value"] == pytest.approx(60_000 / 16_000) and best["met"] is True
    p99 = ratios["p99 at 1k/s aeron / lowest peer sync p99"]
    assert p99["value"] == pytest.approx(0.6) and p99["met"] is True
    assert ratios["p50 at 1k/s aeron / etcd sync p50"]["value"] == pytest.approx(0.2)
    assert ratios["sustained rate aeron / gone"]["value"] is None
    targets = bench.compute_targets(systems)
    assert targets["aeron p50 at 1k/s"]["met"] is True and targets["aeron failover"]["met"] is None


def test_unknown_system_or_bad_out_is_one_line_and_exit_2(tmp_path, capsys):
    from benchmarks.__main__ import main

    assert main(["cluster", "--only", "nosuch"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "python -m benchmarks cluster: unknown system nosuch in --only; known: " + ", ".join(bench.SYSTEMS)
    (tmp_path / "a-file").write_text("")
    assert main(["cluster", "--out", str(tmp_path / "a-file" / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot create --out directory" in err


def test_the_one_process_member_is_compared_with_the_four_process_one_when_both_ran():
    systems = {
        "aeron": {"peer": False, "cases": {"sync": {**_case(p50=400_000, p99=900_000), "cpu_per_put_ns": 500_000},
                                           "idle": {"ok": True, "figures": {"cores": 0.2}}}},
        "aeron-processes": {"peer": False, "cases": {"sync": {**_case(p50=6_000_000, p99=9_000_000),
                                                              "cpu_per_put_ns": 9_000_000}}},
        "pysyncobj": {"peer": True, "cases": {"sync": _case(p50=300_000, p99=600_000)}},
    }
    ratios = bench.compute_ratios(systems)
    assert ratios["sync p50 aeron-processes / aeron"]["value"] == pytest.approx(15.0)
    assert ratios["cpu per put aeron-processes / aeron"]["value"] == pytest.approx(18.0)
    p50 = ratios["sync p50 aeron / lowest peer sync p50"]
    assert p50["value"] == pytest.approx(4 / 3) and p50["met"] is False
    assert ratios["sync p99 aeron / lowest peer sync p99"]["met"] is True  # 1.5x, within 2x
    targets = bench.compute_targets(systems)
    assert targets["aeron cpu per sync put"]["met"] is True and targets["aeron idle cpu"]["met"] is False


def test_process_cpu_is_read_from_proc_and_a_gone_process_is_left_out():
    import os

    from benchmarks.cluster.cpu import cpu_snapshot, cpu_used_s, process_cpu_s

    sum(i * i for i in range(200_000))  # some CPU of our own
    assert process_cpu_s(os.getpid()) > 0
    assert process_cpu_s(2**22 + 12345) is None  # above pid_max's default: no such process
    before = {os.getpid(): 0.0, 999_999_999: 5.0}
    assert cpu_used_s(before, cpu_snapshot([os.getpid()])) == pytest.approx(process_cpu_s(os.getpid()), abs=0.05)
