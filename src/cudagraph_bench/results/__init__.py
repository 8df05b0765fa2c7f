"""Reading and judging runs without torch: run files, statistics, the regression rule, baseline, gate, compare."""
