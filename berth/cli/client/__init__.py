"""The client commands of ``berth``: one module per noun, against any Placement-compatible endpoint.
Each is found by ``berth.cli.main.COMMANDS`` and imported only when it runs."""
