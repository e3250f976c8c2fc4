"""``python -m curate ...``: the same as the ``curate`` command."""

import sys

from curate.app.cli import main

if __name__ == "__main__":
    sys.exit(main())
