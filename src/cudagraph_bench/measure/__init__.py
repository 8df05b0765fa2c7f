"""Measuring: forward variants, one case (check against eager, timing), worker isolation, launch microbenchmarks."""
