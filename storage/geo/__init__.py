"""GeoLayer: geo-distributed layered graph storage (spec: design/systems/geolayer.md).

Regions are ints 0..R-1. Modules: ``wan`` (the WAN delay shim shared with the twin),
``topology``, ``items``, ``routing``, ``placement``, ``twin``, ``server``, ``store``.
"""
