"""`python -m tests.simulation`: see tests/simulation/runner.py."""

from tests.simulation.runner import main

main()
