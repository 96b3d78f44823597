"""``python -m synth``: the same command-line app as ``synth``."""

from synth_cli.main import main

if __name__ == "__main__":
    main()
