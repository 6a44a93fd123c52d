"""fleetcache's commands as an ``openstack`` client plugin (osc-lib/cliff entry points).

``plugin.py`` is the module python-openstackclient loads (``openstack.cli.extension``), and
``v1.py`` holds the commands (``openstack.fleetcache.v1``)::

    openstack aggregate cache job create AGG IMG [IMG ...] [--pin-seconds N] [--wait]
    openstack aggregate cache job list AGG [--long]
    openstack aggregate cache job show JOB [--aggregate AGG]
    openstack aggregate cache job host list JOB [--aggregate AGG] [--state STATE]

each with the client's output options (``-f json``, ``-c COLUMN``...).

They authenticate through the client's own session (whatever ``--os-cloud`` or ``OS_*`` gave
it) and reach the catalog's ``compute`` endpoint. osc-lib and cliff come with the
``openstack`` client; fleetcache itself does not need them (extra ``osc``).
"""
