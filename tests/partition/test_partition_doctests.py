import doctest
import importlib
import pkgutil

import pytest

import partition

PARTITION = sorted(
    m.name for m in pkgutil.iter_modules(partition.__path__, "partition.")
)
MODULES = [*PARTITION, "operators.io.partition_book", "operators.cli.partition"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
