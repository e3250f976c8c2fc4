"""A module the sandbox's child takes 3 s to import (a cold start: big libraries, a slow file system)."""

import time

time.sleep(3)


def add(a, b):
    return a + b
