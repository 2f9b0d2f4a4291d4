"""The `samsa` command line."""
