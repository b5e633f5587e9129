"""Java classes by their whole names, each looked up once per JVM.

``jvm.org.apache.iceberg.util.SnapshotUtil`` costs py4j a round trip per name: the JVM is asked
whether ``org``, ``org.apache``, ... is a class, and each package prefix is a miss, which is a
search of every jar on Spark's class path (about 1 ms each, and the JVM view's imports are tried
too). An Iceberg round made about a dozen such lookups: in a JFR profile of 15-file rounds into a
REST catalog, 22% of the commit thread's samples were py4j looking names up in jars. A class looked
up by its whole name is found at once, and is kept here for the next commit.

Used by every module that calls into the JVM by a class's name (``commit_service.iceberg``,
``commit_service.delta``, ``commit_service.spark``); :mod:`commit_service.delta.jvm_handles` keeps
the commit path's static members as well.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_classes: dict[int, tuple[Any, dict[str, Any]]] = {}  # id(jvm) -> (the JVM view, kept alive; its classes)


def java_class(jvm: Any, name: str) -> Any:
    """The class ``name`` (e.g. ``"org.apache.iceberg.util.SnapshotUtil"``; a Scala object's
    class ends in ``$``) of the JVM ``jvm`` (a py4j ``JVMView``), looked up on first use."""
    entry = _classes.get(id(jvm))
    if entry is None:
        with _lock:
            entry = _classes.setdefault(id(jvm), (jvm, {}))
    known = entry[1]
    found = known.get(name)
    if found is None:
        found = known[name] = getattr(jvm, name)  # the whole name in one lookup: no miss per package prefix
    return found


def java_elements(collection: Any) -> list[Any]:
    """The elements of a Java ``Collection`` (a py4j ``JavaList``, ``JavaSet``, a map's
    ``entrySet()``: py4j's map answers ``values()`` in Python, by iterating), read from its array
    by index. Iterating one in Python ends in the Java iterator's ``NoSuchElementException``,
    which pyspark's handler of every JVM exception converts before py4j turns it into
    ``StopIteration``: about 15 round trips, two class-path searches and a stack trace each time a
    loop ends (every round's ``table.spec().fields()`` did that)."""
    array = collection.toArray()
    return [array[i] for i in range(len(array))]
