"""The REST API room: a Nova-compatible WSGI application (the route table in ``routes.py``).

``deploy.deploy`` assembles the middleware pipeline, ``wsgi.init_application`` builds it from a
configuration and is what WSGI servers load; ``docs/api.md`` describes what it serves.
"""
