"""The ``synth`` command-line app (click). Commands import the library lazily so that
``synth --help`` stays fast and never loads Numba."""
