"""What serves each route of the conductors' API, one module per noun (servers, their actions,
flavors, server groups, hosts, operations), the control plane's dashboard figures, and what the
API says of itself (``service``: version discovery and the probes)."""
