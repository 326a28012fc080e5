"""The conductors' HTTP API (``berth conductor``): servers and their actions, flavors, server
groups, hosts and operations, in the shapes of Nova's compute API where they fit (docs/conductor.md).

    app.py                the WSGI application: the web layer's JsonApp over the routes, each
                          with its handler and policy rule
    policy.py             the rules and their defaults
    schemas.py            the request bodies' JSON schemas, and their check
    views.py              servers, operations, hosts, flavors and groups as the API shows them
    operation_figures.py  the journal's operations in /metrics
    handlers/             one module per noun:
      servers.py            create, list, show, delete; a server's operations
      actions.py            POST /servers/{id}/action, and a down host's evacuation
      flavors.py            flavors and their extra specs
      server_groups.py      server groups
      hosts.py              registration and heartbeat, list, disable and enable, retire
      operations.py         the journal's operations
      dashboard.py          the control plane at a glance, for the service's dashboard page
      service.py            version discovery, health and readiness, the OpenAPI document
"""
