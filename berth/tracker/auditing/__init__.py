"""The periodic audit of a host's claims against Placement and the hypervisor (``audit``), and
what it compares (``audit_books``)."""
