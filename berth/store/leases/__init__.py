"""Claim leases: allocations released unless confirmed in time (``ledger``), and the thread of each
server worker that releases the expired ones (``reaper``).

May import the Placement nouns (a lease releases allocations), the store's core and the domain.
"""
