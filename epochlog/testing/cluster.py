"""The local cluster for tests and benchmarks (it lives in `epochlog.node.local_cluster`, which
`epochlog up` and the demo use too)."""

from epochlog.node.local_cluster import STATE_FILE, BrokerProcess, ClusterError, LocalCluster

__all__ = ["STATE_FILE", "BrokerProcess", "ClusterError", "LocalCluster"]
