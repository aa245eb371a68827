"""What users give dis-serve, read one way: a command's options, declared on its request model."""
