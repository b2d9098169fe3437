"""generate.py's three modes, each with its flags, their checks and its run: sampling, the
attention maps, the coreference probe."""
