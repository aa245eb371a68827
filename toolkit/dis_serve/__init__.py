"""dis-serve: one topology file to a running, measured, disaggregated Dynamo deployment."""

__version__ = "0.1.0"
