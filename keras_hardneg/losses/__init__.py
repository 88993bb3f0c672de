"""Contrastive losses: NT-Xent, debiased, hard-negative, Ring and UnReMix."""
