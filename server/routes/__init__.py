"""Route modules: agents and sessions, completions, graphs."""
