"""Model families. Each module reads like its paper: equation numbers in short comments."""
