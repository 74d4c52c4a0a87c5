"""Collectors: the portable backend's profilers and the NPU toolchain's command builders."""
