"""Logger, Tracer and Metrics, created once and shared by every handler.
Service name, namespace and log level come from the POWERTOOLS_* variables
that template.yaml sets in Globals."""

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
tracer = Tracer()
metrics = Metrics()
