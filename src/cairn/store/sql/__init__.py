"""What both SQL stores share: the dialect hooks, the rows, the read statements."""
