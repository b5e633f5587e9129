"""Every exception class of the commit service is in the error tree (it carries its HTTP status
and retryability) or is listed as internal in ``commit_service.errors.INTERNAL`` with where it is
caught; and the tree's classes keep what they promise."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import commit_service
from commit_service import errors
from lakegate_core.errors import LakegateError


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of the commit service, by qualified name."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(commit_service.__path__, "commit_service."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_exception_is_in_the_tree_or_listed_as_internal() -> None:
    classes = exception_classes()
    outside = {name for name, cls in classes.items() if not issubclass(cls, LakegateError)}
    assert outside == set(errors.INTERNAL), (
        f"outside the tree and not in errors.INTERNAL: {sorted(outside - set(errors.INTERNAL))}; "
        f"listed but not found: {sorted(set(errors.INTERNAL) - outside)}"
    )


def test_every_class_of_the_tree_says_its_answer() -> None:
    tree = [cls for cls in exception_classes().values() if issubclass(cls, LakegateError)]
    assert len(tree) >= 20
    for cls in tree:
        assert 400 <= cls.status <= 599 and cls.code, cls
        assert isinstance(cls.retryable, bool), cls
