"""Capture: coding agents' hook payloads become timeline events.

Everything the ``cairn hook`` process imports lives here and uses the standard library
only: the hook runs on every prompt and tool call of an agent, and Python start-up plus
imports are most of its cost (pydantic, FastAPI and the kernel live in the daemon).
"""
