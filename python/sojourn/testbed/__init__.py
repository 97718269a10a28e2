"""The network testbed: namespaces, links, qdiscs, sysctls, the WAN emulator, counters."""
