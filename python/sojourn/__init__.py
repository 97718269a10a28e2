"""sojourn: web servers under overload.

The Python side of sojourn: workloads (``sojourn.workloads``), the network
testbed (``sojourn.testbed``), the experiment runner (``sojourn.runner``),
analysis of per-request records (``sojourn.analysis``) and the HTML report
(``sojourn.report``). The data path (server, load generator, link emulator,
simulator) is the Rust binary ``sojourn-engine``; see ``sojourn.engine``.
"""

__version__ = "0.1.0"
