"""The schemas of the Placement API's bodies and query strings, one module per noun."""
