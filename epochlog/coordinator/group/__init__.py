"""Kafka's classic group coordinator: a sans-I/O shard per `__consumer_offsets` partition."""
