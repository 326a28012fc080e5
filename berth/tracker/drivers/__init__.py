"""Drivers: what a host has, whatever the books say."""

from __future__ import annotations

from berth.tracker.configuration.config import TrackerConfig
from berth.tracker.drivers.base import Driver
from berth.tracker.drivers.fake import FakeDriver
from berth.tracker.drivers.linux import LinuxDriver
from berth.tracker.errors import ConfigError


def make_driver(name: str, config: TrackerConfig) -> Driver:
    if name == "fake":
        return FakeDriver(config.fake)
    if name == "linux":
        return LinuxDriver(config.instances_path)
    raise ConfigError(f"unknown driver {name!r} (fake or linux)")
