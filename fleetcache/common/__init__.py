"""Code shared by every role: configuration, RPC plumbing, database, context, errors."""
