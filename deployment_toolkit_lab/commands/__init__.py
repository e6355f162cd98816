"""The lab's commands, one module each with `main(argv)`, listed in deployment_toolkit_lab/__main__.py's COMMANDS."""
