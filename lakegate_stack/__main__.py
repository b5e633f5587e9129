"""``python -m lakegate_stack``: run the local stack until Ctrl-C (see :mod:`lakegate_stack.stack`)."""

import sys

from lakegate_stack.stack import main

sys.exit(main())
