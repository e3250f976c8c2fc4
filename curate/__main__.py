"""``python -m curate ...`` and the ``curate`` command (``[project.scripts]``).

The CLI is imported inside :func:`main`, not when this module is: a local cluster's worker processes
are spawned, and a spawned process re-imports its parent's main module (this one, or the ``curate``
script that imports :func:`main` from it). The CLI's imports, ~0.6 CPU-s, are nothing a worker needs.
"""

import sys


def main(argv=None) -> int:
    from curate.app.cli import main as cli

    return cli(argv)


if __name__ == "__main__":
    sys.exit(main())
