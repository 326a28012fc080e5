"""The simulated cloud: its processes (``processes``), its many hosts in one process (``hostpool``),
its make-up drawn from the seed (``layout``), and the faults injected into it (``faults``)."""
