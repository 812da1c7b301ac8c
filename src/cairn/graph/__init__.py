"""The decision graph: role profiles and the policy passport, the pre-selector that walks
only what a role may walk, the selector, budget gate and templater that answer "why", the
trace bundle of each answer, and the fixtures that load a graph."""

__all__: list[str] = []
