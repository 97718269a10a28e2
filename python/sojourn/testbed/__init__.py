"""The network testbed: namespaces, the bottleneck uplink, the WAN emulator,
TCP knobs and kernel counters (docs/testbed.md).

    from sojourn.testbed import Testbed, TestbedConfig, WanGroup, TcpKnobs
    with Testbed(TestbedConfig(prefix="sjx", groups=[WanGroup("g0", rtt_ms=100)])) as tb:
        tb.popen(tb.server_ns, [...]); tb.popen(tb.client_ns, [...])
"""

from .config import ConfigError, TcpKnobs, TestbedConfig, WanGroup
from .sysnet import NetError
from .topology import Testbed

__all__ = ["ConfigError", "NetError", "TcpKnobs", "Testbed", "TestbedConfig", "WanGroup"]
