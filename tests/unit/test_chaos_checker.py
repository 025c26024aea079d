"""The chaos checker on hand-made histories: a clean one, and one per anomaly."""

from __future__ import annotations

from epochlog.testing.chaos.checker import Anomaly, check, unavailability
from epochlog.testing.chaos.history import (
    ControllerClaim,
    FaultSpan,
    History,
    Incarnation,
    Op,
    OpKind,
    ReplicaRecord,
    Status,
    TxnOp,
)
from epochlog.testing.txn_checker import Outcome, ReadRecord, Transaction, Write


def send(value: str, offset: int, t: float, status: Status = Status.OK, p: int = 0) -> Op:
    return Op("producer-0", OpKind.SEND, status, t, t + 0.1, value, "t", p, offset)


def poll(who: str, value: str, offset: int, t: float, session: int = 0) -> Op:
    return Op(who, OpKind.POLL, Status.OK, t, t, value, "t", 0, offset, session)


def commit(who: str, offset: int, invoke: float, complete: float) -> Op:
    return Op(who, OpKind.COMMIT, Status.OK, invoke, complete, None, "t", 0, offset, group="g")


def clean_history() -> History:
    h = History()
    h.ops = [send(f"v{i}", i, float(i)) for i in range(5)]
    h.ops += [poll("reader-0", f"v{i}", i, 10.0 + i) for i in range(5)]
    h.ops += [commit("member-0", 2, 11.0, 11.5), commit("member-1", 5, 12.0, 12.5)]
    h.final_reads = {"ck": [ReadRecord("t", 0, i, f"v{i}") for i in range(5)]}
    h.high_watermarks = {("t", 0): 5}
    h.replicas = {("t", 0): {b: [ReplicaRecord(i, f"v{i}") for i in range(5)] for b in (1, 2, 3)}}
    h.controller_claims = [ControllerClaim(1, 1, ""), ControllerClaim(2, 2, "")]
    h.duration_s = 15.0
    return h


def anomalies(h: History) -> set[Anomaly]:
    return {f.anomaly for f in check(h).findings}


def test_a_clean_history_has_no_anomaly() -> None:
    result = check(clean_history())
    assert result.ok, result.findings
    assert result.acknowledged == 5


def test_an_acknowledged_value_nobody_read_is_a_lost_write() -> None:
    h = clean_history()
    h.ops.append(send("v9", 9, 3.0))
    h.ops.append(send("v10", -1, 3.0, Status.INFO))  # indeterminate: may be missing
    result = check(h)
    assert [f.anomaly for f in result.findings] == [Anomaly.LOST_WRITE]
    assert "'v9'" in result.findings[0].detail


def test_a_value_at_two_offsets_is_a_duplicate() -> None:
    h = clean_history()
    h.final_reads["ck"].append(ReadRecord("t", 0, 5, "v1"))
    assert Anomaly.DUPLICATE in anomalies(h)


def test_two_values_at_one_offset_are_inconsistent() -> None:
    h = clean_history()
    h.ops.append(poll("reader-1", "v9", 3, 20.0))
    assert Anomaly.INCONSISTENT_OFFSET in anomalies(h)


def test_a_reader_going_back_within_a_session_is_non_monotonic() -> None:
    h = clean_history()
    h.ops.append(poll("reader-0", "v1", 1, 20.0))
    assert anomalies(h) == {Anomaly.NONMONOTONIC_READ}


def test_a_new_session_may_read_again_from_an_earlier_offset() -> None:
    h = clean_history()
    h.ops.append(poll("reader-0", "v1", 1, 20.0, session=1))
    assert anomalies(h) == set()


def test_a_reader_jumping_over_records_skips_offsets() -> None:
    h = clean_history()
    h.ops = [op for op in h.ops if not (op.kind is OpKind.POLL and op.offset == 2)]
    result = check(h)
    assert [f.anomaly for f in result.findings] == [Anomaly.SKIPPED_OFFSET]
    assert "[2]" in result.findings[0].detail


def test_a_commit_below_an_earlier_acknowledged_one_moves_backwards() -> None:
    h = clean_history()
    h.ops.append(commit("member-0", 3, 13.0, 13.2))
    assert anomalies(h) == {Anomaly.OFFSET_BACKWARDS}


def test_concurrent_commits_may_land_in_either_order() -> None:
    h = clean_history()
    h.ops.append(commit("member-0", 4, 12.1, 12.6))  # sent before the commit of 5 completed
    assert anomalies(h) == set()


def txn_history(fencing_init_s: float) -> History:
    h = clean_history()
    h.transactional_topics = {"out"}
    committed = Transaction(
        "ctp-1", (Write("out", 0, "o1"), Write("out", 1, "o2")), Outcome.COMMITTED
    )
    aborted = Transaction("ctp-2", (Write("out", 0, "o3"),), Outcome.ABORTED)
    h.txns = [TxnOp(committed, "tx", 0, 5.0, 6.0), TxnOp(aborted, "tx", 0, 7.0, 8.0)]
    h.incarnations = [Incarnation("tx", 0, 1.0), Incarnation("tx", 1, fencing_init_s)]
    h.final_reads["ck-committed"] = [ReadRecord("out", 0, 0, "o1"), ReadRecord("out", 1, 0, "o2")]
    return h


def test_transactions_read_whole_and_committed_are_clean() -> None:
    assert anomalies(txn_history(fencing_init_s=9.0)) == set()


def test_an_aborted_transaction_read_is_g1a_and_a_half_read_one_is_torn() -> None:
    h = txn_history(fencing_init_s=9.0)
    h.final_reads["ck-committed"] = [ReadRecord("out", 0, 0, "o1"), ReadRecord("out", 0, 1, "o3")]
    assert {Anomaly.ABORTED_READ, Anomaly.TORN_TRANSACTION} <= anomalies(h)


def test_a_transaction_begun_after_its_producer_was_fenced_and_read_is_a_fenced_write() -> None:
    result = check(txn_history(fencing_init_s=4.0))
    assert [f.anomaly for f in result.findings] == [Anomaly.FENCED_WRITE]
    assert "ctp-1" in result.findings[0].detail


def test_replicas_differing_below_the_high_watermark_diverge() -> None:
    h = clean_history()
    h.replicas[("t", 0)][3] = [ReplicaRecord(i, f"v{i}") for i in range(3)]  # lost its tail
    h.replicas[("t", 0)][2] = [*h.replicas[("t", 0)][2], ReplicaRecord(5, "above-hw")]
    result = check(h)
    assert [f.anomaly for f in result.findings] == [Anomaly.REPLICA_DIVERGENCE]
    assert "2 offsets" in result.findings[0].detail


def test_two_brokers_claiming_one_controller_epoch() -> None:
    h = clean_history()
    h.controller_claims.append(ControllerClaim(3, 2, ""))
    assert anomalies(h) == {Anomaly.TWO_CONTROLLERS}


def test_unavailability_charges_each_gap_to_the_faults_over_it() -> None:
    h = History()
    h.ops = [send("a", 0, 0.0), send("b", 1, 0.5), send("c", 2, 5.0), send("d", 3, 5.5)]
    h.faults = [FaultSpan("kill-leader", "broker 2", 1.0, 3.0)]
    h.duration_s = 6.0
    assert unavailability(h) == {"kill-leader": 5.1 - 0.6}


def test_a_read_committed_reader_polling_an_aborted_value_is_g1a() -> None:
    h = txn_history(fencing_init_s=9.0)
    h.ops.append(Op("reader-committed", OpKind.POLL, Status.OK, 9.0, 9.0, "o3", "out", 0, 1))
    result = check(h)
    assert Anomaly.ABORTED_READ in {f.anomaly for f in result.findings}
    assert any("reader-committed" in f.detail for f in result.findings)


def test_an_input_with_two_committed_outputs_was_processed_twice() -> None:
    h = txn_history(fencing_init_s=9.0)
    again = Transaction("ctp-3", (Write("out", 0, "v1>ctp-3"),), Outcome.COMMITTED)
    first = Transaction("ctp-4", (Write("out", 1, "v1>ctp-4"),), Outcome.COMMITTED)
    h.txns += [TxnOp(again, "tx", 0, 7.5, 7.6), TxnOp(first, "tx", 0, 7.7, 7.8)]
    h.final_reads["ck-committed"] += [
        ReadRecord("out", 0, 1, "v1>ctp-3"),
        ReadRecord("out", 1, 1, "v1>ctp-4"),
    ]
    result = check(h)
    assert [f.anomaly for f in result.findings] == [Anomaly.DUPLICATE]
    assert "processed twice" in result.findings[0].detail


def test_a_replica_out_of_the_final_isr_may_lag() -> None:
    h = clean_history()
    h.replicas[("t", 0)][3] = [ReplicaRecord(i, f"v{i}") for i in range(3)]
    h.final_isr = {("t", 0): [1, 2]}
    assert anomalies(h) == set()
    h.final_isr = {("t", 0): [1, 2, 3]}
    assert anomalies(h) == {Anomaly.REPLICA_DIVERGENCE}
