"""Each controller event's Kafka ControllerState, for the controller's metrics: Kafka times the
events of each state under `kafka.controller:type=ControllerStats,name=<state>RateAndTimeMs`
(a broker's change is `LeaderElectionRateAndTimeMs`, as in Kafka's ControllerState.BrokerChange).
Events with no Kafka counterpart (ExecutePlan, StopTakingEvents) are timed under the state
whose work they do or not at all."""

from __future__ import annotations

from epochlog.controller import events as ev

STATE_METRICS: dict[type, str] = {
    ev.Failover: "ControllerChangeRateAndTimeMs",
    ev.BrokerChange: "LeaderElectionRateAndTimeMs",
    ev.TopicChange: "TopicChangeRateAndTimeMs",
    ev.CreateTopics: "TopicChangeRateAndTimeMs",
    ev.CreatePartitions: "TopicChangeRateAndTimeMs",
    ev.TopicDeletion: "TopicDeletionRateAndTimeMs",
    ev.DeleteTopics: "TopicDeletionRateAndTimeMs",
    ev.PreferredReplicaElection: "ManualLeaderBalanceRateAndTimeMs",
    ev.ElectLeaders: "ManualLeaderBalanceRateAndTimeMs",
    ev.ElectPreferredLeaders: "ManualLeaderBalanceRateAndTimeMs",
    ev.AutoLeaderRebalance: "AutoLeaderBalanceRateAndTimeMs",
    ev.LogDirEvents: "LogDirChangeRateAndTimeMs",
    ev.ZkReassignment: "PartitionReassignmentRateAndTimeMs",
    ev.AlterPartitionReassignments: "PartitionReassignmentRateAndTimeMs",
    ev.ReassignmentIsrChanged: "PartitionReassignmentRateAndTimeMs",
    ev.ListPartitionReassignments: "ListPartitionReassignmentRateAndTimeMs",
    ev.TopicConfigChanged: "TopicUncleanLeaderElectionEnableRateAndTimeMs",
    ev.BrokerConfigChanged: "UncleanLeaderElectionEnableRateAndTimeMs",
    ev.LeaderAndIsrAnswered: "LeaderAndIsrResponseReceivedRateAndTimeMs",
    ev.LeaderAndIsrResend: "LeaderAndIsrResponseReceivedRateAndTimeMs",
    ev.AlterPartition: "IsrChangeRateAndTimeMs",
    ev.ControlledShutdown: "ControlledShutdownRateAndTimeMs",
    ev.ExecutePlan: "LeaderElectionRateAndTimeMs",
}
