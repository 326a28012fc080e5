"""Server groups as picks see them: the lock that serialises a group's placements and the hosts its
members are on (``membership``).

May import the store's core and the domain only.
"""
