"""Helpers shared by the test suites (real servers on 127.0.0.1, multi-process drivers)."""
