"""The twin's ``asc.runtime``: only ``config`` (platform selection) is provided."""
