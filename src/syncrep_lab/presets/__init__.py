"""Built-in experiment specs (TOML), loaded with ``--preset NAME``."""
