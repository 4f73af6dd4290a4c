"""Imported by the fork server only: run the parent's main script there, once.

``multiprocessing`` means to do this itself when ``"__main__"`` is in the fork
server's preload list, but Python 3.11 never passes the script's path to the server
(it asks for a ``main_path`` key that the preparation data names
``init_main_from_path``). Every worker then re-runs the main script, re-importing
whatever it imports that the server lacks: ``pytest`` costs each worker 0.1-0.7 s,
a script importing torch 2 s. While it starts the server, the process executor puts
the script's path and ``sys.argv`` in ``STRATA_FORK_MAIN``; running the script here,
as workers would (same path, same argv, as ``__mp_main__``), lets them skip it. If it
fails here, nothing changes: each worker runs it, and fails, as it always would.
"""

from __future__ import annotations

import json
import os
import sys
from multiprocessing import process, spawn

_ENV = "STRATA_FORK_MAIN"


def _import_main() -> None:
    spec = os.environ.get(_ENV)
    # Only the fork server acts: it runs as ``python -c 'from multiprocessing...'``.
    if not spec or sys.argv[:1] != ["-c"]:
        return
    main = json.loads(spec)
    if getattr(sys.modules["__main__"], "__file__", None) == main["path"]:
        return  # already there (a Python whose fork server does this itself)
    argv = sys.argv
    current = process.current_process()
    current._inheriting = True  # type: ignore[attr-defined]  # as multiprocessing does
    sys.argv = main["argv"]
    try:
        spawn.import_main_path(main["path"])
    except BaseException:
        pass
    finally:
        sys.argv = argv
        del current._inheriting  # type: ignore[attr-defined]


_import_main()
