"""The two kinds of failure a user can see.

``SettingsError`` is bad usage (an option, a job file, a missing input): the CLI exits 2.
``DataError`` is bad data met while running (a broken line, a corrupt file): the CLI exits 1.
Both carry a one-line message that names the file, row or option.
"""


class CurateError(Exception):
    """Base of every error that the CLI reports as one line without a traceback."""

    exit_code = 1


class SettingsError(CurateError, ValueError):
    exit_code = 2


class DataError(CurateError):
    exit_code = 1
