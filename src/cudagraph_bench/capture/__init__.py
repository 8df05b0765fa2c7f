"""Graph capture and replay of a model: GraphedForward, padding and bucket graphs, graphed decode."""
