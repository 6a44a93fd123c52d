"""The conductor: the planner that validates, fans out to computes, and records jobs."""
