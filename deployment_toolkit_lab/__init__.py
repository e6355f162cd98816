"""The project's lab: what measures the toolkit itself. It imports the product (deployment_toolkit); never reversed."""
from __future__ import annotations

import logging


def console_logging(level: int = logging.INFO) -> logging.Handler:
    """The lab's modules log under `deployment_toolkit_lab`, outside the toolkit's logger: route them to the console
    through the toolkit's one handler (cli.console_logging), as every toolkit command's library logs reach the user.
    Installing twice keeps one handler."""
    from deployment_toolkit.cli import console_logging as toolkit_console

    handler = toolkit_console(level)
    logger = logging.getLogger(__name__)
    if handler not in logger.handlers:
        logger.addHandler(handler)
        logger.setLevel(min(level, logger.level or level))
        logger.propagate = False
    return handler
