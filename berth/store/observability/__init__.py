"""What the dashboard, the metrics scrape and the readiness probe read: the cloud's figures and
rankings, the page of provider trees, and whether the schema is current. Reads only.

May import the store's core and the domain only: each figure is one statement over the tables.
"""
