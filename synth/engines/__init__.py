"""Engines layer: MWEM (classic, adaptive, budget plan, noise choice), PMW (textbook and
practical, plan, monitor) and BLR (net mechanism, released prior). Imports the models layer
and below."""
