"""The coding-agent mutator: a tool-calling conversation with a chat model (`mutator`), its tools (`toolbox`),
workspace and versioned prompt templates (`prompts`, `templates/`)."""
