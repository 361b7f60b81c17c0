"""nlpbench: regenerate the result tables of five NLP documents from one command."""

__version__ = "0.1.0"
