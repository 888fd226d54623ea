"""dvtool: maintenance for Delta Lake tables with deletion vectors."""

__version__ = "0.1.0"
