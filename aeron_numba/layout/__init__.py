"""Byte layouts of Aeron 1.48's files and messages (../shared/spec), one module per format.

Every offset, length and id used anywhere in the project is defined here once. Modules hold constants,
``check_*`` guards and the pure arithmetic of their format; kernels import them as compile-time constants.
"""
