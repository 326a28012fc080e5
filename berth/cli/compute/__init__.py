"""The operator's commands of the conductors' API (``berth conductor``): servers and their actions,
flavors, hosts, server groups, operations; one module per noun. Each is found by
``berth.cli.main.COMMANDS`` and imported only when it runs (the server group from
``berth.cli.compute.actions``, which adds the actions to it)."""
