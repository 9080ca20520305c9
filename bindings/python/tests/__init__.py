"""Tests of the smartdev Python binding (``unittest`` only).

Run from the repository root after ``cargo build --lib``::

    python3 -m unittest discover -s bindings/python/tests -t bindings/python -v

``SMARTDEV_LIB`` selects the library; ``SDCTL_BIN`` (the ``sdctl`` binary) enables the emulator tests.
``cargo test --test python_binding`` sets both.
"""
