"""The backend of hosted agents, apart from the graph's runtime: what `canvas2graph serve` keeps.

`store` holds tokens, agents, versions, sessions, messages, leases, webhook calls and rate buckets (SQLite
or PostgreSQL); `versions` the DSL's history; `conversations` a session's messages as RAGFlow lists
them; `webhook` and `webhook_runs` the Webhook begin mode; `templates` the shipped templates;
`component_debug` runs one component alone; `dsl_reset` clears a DSL's run state; `agent_tests/`
regression cases and evaluations.
"""
