"""Slow, obvious pure-Python reference implementations the kernels are tested against."""
