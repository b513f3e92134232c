"""Ports for units: the port ranges a run leases (``ranges``), the per-user registry of leases
(``registry``), whether a port is free (``probe``) and a unit's reservation (``reserve``)."""
