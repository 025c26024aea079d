"""The test side of fault injection: `FaultRules.write` edits the rules a running cluster's
brokers apply (the brokers' side is `epochlog.faults`, which production code consults)."""

from epochlog.faults import FaultInjector, FaultRules

__all__ = ["FaultInjector", "FaultRules"]
