"""I/O steps over storage: datasets loaded into pipelines as wire-encodable payloads.

See :mod:`operators.io.datasets`.
"""
