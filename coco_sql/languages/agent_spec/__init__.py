"""The agent-spec program kind (issue 30). For now only its DABStep-style answer scorer lives here."""
