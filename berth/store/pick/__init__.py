"""Pick and claim (``POST /berth/pick``): weigh the trees that fit, choose one and write its
allocation in one transaction (``transaction``), on each process's board of every tree when the
request allows (``host_board``, ``on_board``), with the weighers' facts (``host_facts``), the write
(``claim``) and the next best trees (``alternates``); a gang of consumers placed all or none
(``gang``, planned by ``gang_plan``).

May import the candidate search, leases, server groups, the Placement nouns, the store's core and
the domain; nothing else in the store imports it.
"""
