"""The broker's data plane: the Kafka-protocol server and everything behind it.

- `broker`: the `Broker` object assembling the parts, with injected collaborators
  (`collaborators`: controller gateway, topic auto-creator, producer ids, broker epoch).
- `server`, `transmit`, `eventloop`: framing and in-order request handling per connection,
  sendfile for fetched log data, the event-loop choice.
- `handlers/`: one handler per API.
- `replica_manager`, `partition`, `appends`, `reads`, `delayed`: hosted partitions, the produce
  and fetch paths, delayed produces and long-poll fetches.
- `metadata_cache`, `producer_state`: cluster metadata from the controller, idempotence.
- `control_rules`, `partition_rules`, `produce_validation`: the decisions, as pure functions.
- `config`: server.properties; `main`: the process wiring; `harness`: a broker without
  ZooKeeper for tests and benchmarks.
"""
