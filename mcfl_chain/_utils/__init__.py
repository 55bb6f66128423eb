"""Private helpers shared by several packages."""
