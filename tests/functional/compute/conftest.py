"""What the functional tests of one compute share: its configuration."""

from __future__ import annotations

import pathlib
import uuid

import pytest
from oslo_config import cfg


@pytest.fixture
def conf(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> cfg.ConfigOpts:
    """The shared configuration (tests/conftest.py) for a disk-driver compute of a name of
    its own (fake:// queues outlive a test), caching into and fetching from the test's
    directory (a local image source)."""
    conf.set_override("host", f"compute-{uuid.uuid4().hex[:8]}")
    conf.set_override("instances_path", str(tmp_path / "instances"))
    conf.set_override("compute_driver", "disk")
    conf.set_override("backend", "local", group="image_source")
    conf.set_override("local_directory", str(tmp_path / "images"), group="image_source")
    return conf
