"""The Placement API's nouns as rows: providers, their inventories, traits and aggregates, resource
classes and traits by name, consumers, allocations and usages.

May import the store's core (``berth.store``: database, schema, plain SQL) and the domain; every
other room of the store builds on this one, so it imports none of them.
"""
