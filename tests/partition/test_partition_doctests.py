import doctest
import importlib
import pkgutil

import pytest

import partition

MODULES = sorted(m.name for m in pkgutil.iter_modules(partition.__path__, "partition."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
