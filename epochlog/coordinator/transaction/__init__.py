"""The transaction coordinator (issue 17): sans-I/O shard, state machine, records."""
