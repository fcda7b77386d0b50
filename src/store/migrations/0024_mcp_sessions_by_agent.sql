-- An agent keeps at most so many MCP sessions: beginning another counts
-- its own and forgets its least recently used, by agent.
CREATE INDEX mcp_session_owners_by_agent ON mcp_session_owners (agent_id);
