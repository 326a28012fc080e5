"""Per-project quotas: the limits (``limits``), what a project or user holds (``usage``), and the
check every pick makes, and every Placement allocation write when the operator asks for it, in the
claim's own write transaction (``enforcement``).

May import the store's core and the domain only.
"""
