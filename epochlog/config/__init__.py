"""Configuration, below everything that reads it: the broker's settings (`broker.py`, Kafka's
server.properties keys) and topic-level overrides (`topic.py`). The data plane, the controller
and the coordinators all import from here, never from each other."""
