"""Settings, embeddings, knowledge bases, keyword index, loaders, models, search, checkpoints."""
