"""The allocation candidate search as ``GET /allocation_candidates`` runs it: which trees to search
(``roots``), the search over them (``finder``) with each process's copies of providers
(``provider_cache``), names and ids both ways (``names``), and why a request found little
(``explain``).

May import the Placement nouns (``berth.store.placement``), the store's core and the domain.
"""
