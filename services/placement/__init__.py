"""The placement service: chooses ensembles."""
