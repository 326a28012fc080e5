"""The handlers of the Placement API, one module per noun, as the reference splits them."""
