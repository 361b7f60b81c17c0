"""ACVI family (thesis ch. 7, ACVI paper): pointer-generator summarization and video captioning with soft,
structured and ACVI attention.

Modules: tokenize (See et al. PTB preprocessing), data (CNN/DM mirror subset, QG pairs, lead-k, synthetic video
features), vocab (extended vocabulary), batching, attention (ASA, ACVI thesis/paper, structured CRF), model
(pointer-generator + coverage), beam (beam search, K-sample ACVI decoding), video (captioning seq2seq), rates
(novel-word / OOV adoption readings), released (lead-3 and released outputs scored), train (one run).
Params: the `acvi:` section and the acvi tables of params.yaml (family.py wires it). Metrics: nlpbench.metrics.rouge.
"""
