"""The fleetcache database: models, the query API, and alembic migrations.

Only the API and the conductor use it; compute agents hold no database credentials.
"""
