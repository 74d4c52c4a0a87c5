"""The twin's ``asc.lib``: only ``runtime`` (streams) is provided; ``asc.lib.profiling`` is not."""
