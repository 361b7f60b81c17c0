"""Dataset download, verification and parsing (bAbI: `nlpbench.data.fetch`, `nlpbench.data.babi`)."""
