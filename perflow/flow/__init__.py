"""Analysis flows: the pass registry, flows in Python and YAML, and the scheduler."""

from .registry import PassSpec, Port, Setting, all_passes, get_pass, pass_

__all__ = ["pass_", "PassSpec", "Port", "Setting", "get_pass", "all_passes"]
