"""bench.py's benchmarks, a module for each kind of work timed; bench.py runs them by name."""
