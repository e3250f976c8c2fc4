"""Commands that are not stages; each module has HELP, add_arguments(parser) and main(args) -> int."""
