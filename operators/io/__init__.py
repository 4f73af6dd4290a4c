"""I/O steps over storage: datasets loaded into pipelines as wire-encodable payloads.

See :mod:`strata.operators.io.datasets`.
"""
