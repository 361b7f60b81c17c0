"""Seed 004 chapters 3-5 and appendix A: the baseline reading-comprehension model on SQuAD v1.1.

Modules: data (download, verify, tokenise, split), glove (word vectors), model (Figure 3.7 with pluggable
similarity and output formation), similarity (Table 4.1 + T-trilinear), output (O_1/O_2, RIG_1-RIG_6, chapter 5
methods, appendix A), train (one run), decode (span decoding).
"""
