"""Reading CPU time, memory and descendants from /proc (lakegate_stack.procfs), on real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lakegate_stack import procfs

BURN = "import time\nwhile time.process_time() < {s}: pass\n"  # uses at least {s} CPU seconds


def test_a_child_s_cpu_is_counted_for_its_parent_once_it_has_been_waited_for() -> None:
    before = procfs.children_cpu_seconds(os.getpid())
    subprocess.run([sys.executable, "-c", BURN.format(s=0.3)], check=True)
    assert procfs.children_cpu_seconds(os.getpid()) - before >= 0.25


def test_a_command_name_with_spaces_and_parentheses_is_read_past() -> None:
    script = (
        "import sys\nopen('/proc/self/comm', 'w').write('a) (b c')\n"
        + BURN.format(s=0.3)
        + "print('done', flush=True)\nsys.stdin.read()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "done"
        assert Path(f"/proc/{child.pid}/comm").read_text().strip() == "a) (b c"
        assert procfs.stat_fields(Path(f"/proc/{child.pid}/stat"))[0] in "RS"  # the state field
        assert procfs.process_cpu_seconds(child.pid) >= 0.25
        assert procfs.rss_mib(child.pid) > 1
        assert procfs.process_tree([os.getpid()])[0] == os.getpid()
        assert child.pid in procfs.process_tree([os.getpid()])
    finally:
        child.communicate("")
    assert procfs.process_cpu_seconds(child.pid) == 0.0  # gone
