"""Test oracles: naive references of the kernels, kept out of the installed package."""
