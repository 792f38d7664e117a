"""Items from the worker's pipelines into the Redis item buffer, each with its identity."""
