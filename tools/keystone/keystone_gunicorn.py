"""Keystone's WSGI application, for gunicorn (``--pythonpath tools/keystone
keystone_gunicorn:application``).

``keystone.server`` parses ``sys.argv`` with oslo.config when it builds the application (it is
written for uWSGI and mod_wsgi, whose arguments are not the Python process's): under gunicorn
it would read gunicorn's own options and exit with "unrecognized arguments". Its configuration
comes from ``OS_KEYSTONE_CONFIG_DIR`` instead, so the arguments are dropped first.
"""

import sys

sys.argv = sys.argv[:1]

from keystone.wsgi.api import application  # noqa: E402

__all__ = ["application"]
