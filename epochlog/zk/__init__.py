"""Everything that touches ZooKeeper, in Kafka's ZooKeeper-mode layout.

- `launcher`: run Debian's ZooKeeper server as a child process (tests, `epochlog up`).
- `znodes`: paths and Kafka's znode JSON, pure codecs and dataclasses.
- `session`: the configured kazoo client, transactions that raise, asyncio bridges, forced expiry.
- `registration`: /brokers/ids registration and the broker epoch (KIP-380), re-registration.
- `controller_zk`: controller election, epoch-fenced writes, the controller's reads.
- `cluster`: top-level paths, cluster id, producer id blocks (unfenced, any broker).
- `pinning`: KIP-39's next_controller and ready-to-serve znodes and decisions.
- `watches`: typed watches (brokers, controller, topics, deletions, KIP-39) onto an asyncio loop.

Import the modules directly (`from epochlog.zk.controller_zk import try_elect`); this package
imports nothing so that `launcher` and `znodes` stay usable without kazoo's threads.
"""
