"""The command lines of the processes the package runs (``python -m aeron_numba driver``, ``archive``): the top
layer, as they glue the settings reference and logging set-up of every component to one process. The tools' and
the demo's command lines live with them (``tools/``, ``demo.py``)."""
