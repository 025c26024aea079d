"""Network faults for tests and the chaos runner: nodes in network namespaces, faults on links.

`NetLab` (lab.py) builds the namespaces and injects cut, one-way cut, delay (with jitter) and loss
on chosen directed links; `layout.py` holds its pure parts (addresses, names, the `ip` steps of
each fault), `shaper.py` the user-space delay and loss this kernel's missing sch_netem needs.
"""

from epochlog.testing.netlab.lab import NamespacedZooKeeper, NetLab
from epochlog.testing.netlab.layout import Layout, LinkFault, NetLabError, Shape

__all__ = ["Layout", "LinkFault", "NamespacedZooKeeper", "NetLab", "NetLabError", "Shape"]
