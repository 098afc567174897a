"""Graph nodes, routing functions, prompts, and the judges with their local and LLM backends."""
