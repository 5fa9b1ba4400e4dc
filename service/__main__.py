"""``python -m service`` and the ``logcleaner`` script: the CLI (``service.shell.cli``)."""

import gc


def run() -> None:
    """Import the CLI with the cyclic collector paused, then run it and exit with its code. The imports
    only add long-lived objects (modules, classes, pydantic's schemas): collecting while they are made
    walked them again and again (a sixth of ``serve``'s imports). Frozen after (``gc.freeze``), later
    collections skip them. Nothing is imported before the pause (not even ``typing``)."""
    gc.disable()
    try:
        from service.shell.cli import main
        from service.shell.process_exit import exit_process
    finally:
        gc.freeze()
        gc.enable()
    exit_process(main())


if __name__ == "__main__":
    run()
