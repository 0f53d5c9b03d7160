"""Helpers shared by test modules, imported by package path (``from helpers.server import ...``):
pytest puts ``tests/`` on ``sys.path`` (pyproject ``pythonpath``), so no test imports ``conftest`` by name."""
