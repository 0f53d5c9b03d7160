"""One module per page: ``register_page``, ``layout(**query)`` and the page's callbacks (ids prefixed by
the page's name)."""
