"""The lab: what watches a training run from outside its loop (the live probe, the plots) and
train.py's whole run, the core loop with them (lab/run.py)."""
