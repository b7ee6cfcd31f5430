"""Paimon's planners: one module per plan kind, each with its registry entry."""
