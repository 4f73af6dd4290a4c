import doctest
import importlib
import pkgutil

import pytest

import strata.partition

PARTITION = sorted(
    m.name for m in pkgutil.iter_modules(strata.partition.__path__, "strata.partition.")
)
MODULES = [
    *PARTITION,
    "strata.operators.io.partition_book",
    "strata.operators.cli.partition",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
