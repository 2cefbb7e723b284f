"""The `e31` commands, by topic; e31cli.main puts them on the command line."""
