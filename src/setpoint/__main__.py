"""`python -m setpoint`: the same command line as the `setpoint` console script."""

from setpoint.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
