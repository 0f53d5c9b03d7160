"""The database layer: embedded PostgreSQL, SQLAlchemy models of schema v1, engine and migrations.

Importing this package is cheap; SQLAlchemy is imported by the submodules that need it.
"""
