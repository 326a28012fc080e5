"""The load tools' commands, each the options of a run in ``berth.testbed``: ``berth bench``,
``berth stress``, ``berth sim``."""
