"""The timeline: events summarised at every scale of time (year → month → week → day →
segment), each summary's bullets tied by grips to the exact events they came from."""
