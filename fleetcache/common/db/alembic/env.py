"""Alembic environment: runs migrations on the engine ``migration.py`` hands over."""

from alembic import context

from fleetcache.common.db import models

config = context.config
engine = config.attributes["engine"]

with engine.begin() as connection:
    context.configure(
        connection=connection,
        target_metadata=models.Base.metadata,
        render_as_batch=True,
    )
    context.run_migrations()
