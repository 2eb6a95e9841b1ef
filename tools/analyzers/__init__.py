"""Static analyzers of user code (AST) that are too big to be a detector."""
