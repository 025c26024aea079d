"""A broker process assembled: the data plane, the controller, the coordinators and ZooKeeper.

`broker/`, `controller/` and `coordinator/` do not import each other; this package wires them
(`process.py`), and implements the collaborators each side declares for the other
(`controller_gateway.py`).
"""
