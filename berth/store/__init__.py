"""The database: the books as tables, one room per concept.

At the top, the core every room stands on: the engine and its transactions (``database``), the
tables (``schema``) and their migrations (``migrate``, ``migrations/``), plain SQL (``rawsql``) and
the capacity rule as SQL clauses (``capacity_sql``). The core imports the domain only.

Above it, ``placement`` (the Placement API's nouns), then ``candidates``, ``leases`` and
``server_groups``, then ``pick``; ``observability`` reads beside them. Each room's ``__init__`` says
what it may import, and tests/test_layers.py holds the rule.
"""
