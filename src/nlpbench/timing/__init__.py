"""The pipeline's measurements of itself, in one package that depends on the families and is never imported by
them (a test keeps it so):

    targets     the timing benchmarks as pipeline targets (outputs with `family: timing`, built on demand)
    memnet, memnet_jobs, dmn, squad, acvi
                each family's timing benchmark, one table each (results/<source>/<name>.md)
    plain_dmn   the DMN written plainly, the padded baseline the DMN benchmark times beside the family's model
    records     the whole-pipeline measurements' declarations (pipeline/end-to-end.yaml) and records
    end_to_end  `nlpbench end-to-end NAME`: those measurements, in a scratch clone
    commits     two commits' grouped training steps side by side (python -m nlpbench.timing.commits)
    report      the sectioned Markdown the benchmarks write
"""
