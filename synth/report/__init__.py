"""Report layer: evaluation of a release against the data and baselines, and the HTML report.
Imports the engines layer and below."""
