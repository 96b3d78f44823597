"""``python -m synth``: the same command-line app as ``synth``."""

from cli.main import main

if __name__ == "__main__":
    main()
