"""Models layer: the distribution interface with its dense and factored (junction tree)
implementations, fitting, sampling and matching, synthetic tables and the model file. Imports
the data layer and below."""
