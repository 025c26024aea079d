"""Coordinators (groups; transactions later): sans-I/O shards and the runtime that drives them."""
