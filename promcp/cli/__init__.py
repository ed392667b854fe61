"""Command-line interface."""


def main() -> int:
    return 0
