"""The replay report and choosing knobs out of sample."""
