"""Rendering runs without torch: markdown pages, the README block, plots, the launch-overhead page."""
