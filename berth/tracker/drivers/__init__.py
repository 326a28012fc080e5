"""Drivers: what a host has, whatever the books say."""

from __future__ import annotations

from berth.tracker.drivers.base import Driver


def make_driver(name: str, config) -> Driver:
    if name == "fake":
        from berth.tracker.drivers.fake import FakeDriver

        return FakeDriver(config.fake)
    if name == "linux":
        from berth.tracker.drivers.linux import LinuxDriver

        return LinuxDriver(config.instances_path)
    raise ValueError(f"unknown driver {name!r} (fake or linux)")
